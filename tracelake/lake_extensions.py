"""DuckDB's lakehouse extensions, loaded from the Python packages that ship them, never downloaded.

DuckDB fetches an extension from extensions.duckdb.org on `LOAD`, which an offline cluster (and CI
here) cannot reach. The `duckdb-extension-*` wheels on PyPI hold the extension files built for one
DuckDB release (up to 1.5.5, hence the pin in pyproject.toml); they are loaded by their path, so
`LOAD` never touches the network.
"""

from __future__ import annotations

import importlib
import os
import uuid
from functools import cache
from pathlib import Path

import duckdb

from tracelake.core.errors import WarehouseError

# extension -> the module its wheel installs
_PACKAGES = {
    "ducklake": "duckdb_extension_ducklake",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    "postgres_scanner": "duckdb_extension_postgres_scanner",
}


@cache
def extension_file(name: str) -> Path:
    """The extension file of `name` built for the DuckDB this process runs."""
    try:
        module = importlib.import_module(_PACKAGES[name])
    except ImportError:
        raise WarehouseError(f"the DuckDB extension {name} is not installed: pip install "
                             f"'{_PACKAGES[name].replace('_', '-')}=={duckdb.__version__}'") from None
    folder = Path(module.__file__ or "").parent / "extensions" / f"v{duckdb.__version__}"
    found = folder / f"{name}.duckdb_extension"
    if not found.is_file():
        raise WarehouseError(f"the installed DuckDB extension {name} is not built for DuckDB {duckdb.__version__} "
                             f"(no {found}); install the duckdb-extension-* packages of that version")
    return found


def extension_directory(*names: str) -> Path:
    """A DuckDB extension folder (`<dir>/v<version>/<platform>/<name>.duckdb_extension`) holding links
    to the packaged files of `names`: a database opened with it as its `extension_directory` loads
    them itself, as the connection string `ducklake:...` needs, and never downloads one."""
    platform = duckdb.execute("pragma platform").fetchone()[0]  # type: ignore[index]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracelake" / "duckdb-extensions"
    folder = cache / f"v{duckdb.__version__}" / str(platform)
    for name in names:
        link, target = folder / f"{name}.duckdb_extension", extension_file(name)
        if link.is_file() and link.resolve() == target.resolve():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        fresh = folder / f".{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        fresh.symlink_to(target)
        os.replace(fresh, link)  # a link made by another process at once is the same link
    return cache


def load_extensions(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Load each extension into `con` from its file (a no-op when it is loaded already)."""
    loaded = {row[0] for row in con.execute(
        "select extension_name from duckdb_extensions() where loaded").fetchall()}
    for name in names:
        if name not in loaded:
            path = extension_file(name).as_posix().replace("'", "''")
            con.execute(f"load '{path}'")
