"""Where a lakehouse warehouse keeps its catalog and its data files, as `<warehouse>/lake.json` records.

Every new warehouse is a lakehouse. The catalog is DuckLake's metadata: a SQLite file in the warehouse
folder by default (`local`: one host, any number of processes, no server), or a PostgreSQL database
for writers on many machines (`--catalog postgresql://user@host:port/db`, or `$TRACELAKE_CATALOG`).
`classic` asks for the single-file layout of earlier releases instead (tracelake/warehouse.py), the
one `tracelake build` runs dbt and its data tests on. The data files are Parquet
under `<warehouse>/lake/`, a path every node of a cluster must see. A password is never written
down: PostgreSQL's own `PGPASSWORD` or `~/.pgpass` supplies it, or the URL given to each command.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import msgspec

from tracelake.core.errors import WarehouseError
from tracelake.staging import replace_file

LAKE_FILE = "lake.json"
CATALOG_ENV = "TRACELAKE_CATALOG"
LOCAL_CATALOG = "local"  # the SQLite file <warehouse>/warehouse.sqlite
CLASSIC = "classic"  # no lakehouse: the single DuckDB file of earlier releases
SQLITE_FILE = "warehouse.sqlite"  # its stem is the catalog's name in SQL, as dbt compiled it
DATA_FOLDER = "lake"
COMPILED_NAME = "warehouse"  # the catalog dbt compiled every relation under ("warehouse"."main"."kernels")
_POSTGRES = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


class LakeLayout(msgspec.Struct, frozen=True):
    """lake.json: the catalog (`local` or a PostgreSQL URL without its password)."""

    catalog: str
    format: int = 1


def check_catalog(catalog: str) -> str:
    """`catalog` as lake.json records it (or `classic`); WarehouseError when it is none of `local`,
    `classic` or a PostgreSQL URL."""
    if catalog in (LOCAL_CATALOG, CLASSIC):
        return catalog
    if not _POSTGRES.match(catalog):
        raise WarehouseError(f"--catalog {catalog!r}: give 'local' (a SQLite file in the warehouse), a PostgreSQL "
                             "URL, postgresql://USER@HOST:PORT/DATABASE, or 'classic' (one DuckDB file, no lakehouse)")
    parts = urlsplit(catalog)
    if not parts.hostname or not parts.path.strip("/"):
        raise WarehouseError(f"--catalog {_without_password(catalog)}: a PostgreSQL URL names a host and a "
                             "database, postgresql://USER@HOST:PORT/DATABASE")
    return catalog


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = (parts.username or "") + "@" + (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def requested_catalog(option: str | None) -> str | None:
    """The catalog asked for: the option, else $TRACELAKE_CATALOG, else none (checked)."""
    value = option or os.environ.get(CATALOG_ENV) or None
    return check_catalog(value) if value else None


def read_layout(root: Path) -> LakeLayout | None:
    path = root / LAKE_FILE
    try:
        return msgspec.json.decode(path.read_bytes(), type=LakeLayout)
    except (FileNotFoundError, NotADirectoryError):  # no warehouse there (yet)
        return None
    except (OSError, msgspec.DecodeError) as exc:
        raise WarehouseError(f"{path} is not a lakehouse layout TraceLake wrote ({exc})") from None


def write_layout(root: Path, catalog: str) -> LakeLayout:
    layout = LakeLayout(_without_password(catalog))
    replace_file(root / LAKE_FILE, msgspec.json.encode(layout) + b"\n")
    return layout


def attach_target(root: Path, layout: LakeLayout, given: str | None) -> str:
    """The DuckLake ATTACH string: the SQLite file, or the PostgreSQL URL (the one given to this
    command when it names the same catalog: it may carry the password)."""
    if layout.catalog == LOCAL_CATALOG:
        return f"ducklake:sqlite:{(root / SQLITE_FILE).as_posix()}"
    url = given if given and _without_password(given) == layout.catalog else layout.catalog
    return f"ducklake:postgres:{url}"


def catalog_name(layout: LakeLayout) -> str:
    """The name the lake has in SQL: the SQLite file's stem, or the PostgreSQL database's name."""
    if layout.catalog == LOCAL_CATALOG:
        return COMPILED_NAME
    return urlsplit(layout.catalog).path.strip("/")


def extensions_for(layout: LakeLayout) -> tuple[str, ...]:
    return ("ducklake", "sqlite_scanner" if layout.catalog == LOCAL_CATALOG else "postgres_scanner")
