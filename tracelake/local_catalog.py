"""What TraceLake reads (and the one thing it mends) straight from a local lakehouse catalog's SQLite
file, without DuckDB and its DuckLake extension: a millisecond, where opening the lake takes 0.2 s.
Every function takes the catalog file (None, or a file not there yet: no local catalog)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

_DATA_PATH = "select value from ducklake_metadata where key = 'data_path' and scope is null"


def _read_only(catalog: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)


def current_snapshot(catalog: Path | None) -> int | None:
    """The catalog's newest snapshot."""
    if catalog is None or not catalog.exists():
        return None
    with closing(_read_only(catalog)) as db:
        row = db.execute("select max(snapshot_id) from ducklake_snapshot").fetchone()
    return int(row[0]) if row and row[0] is not None else None


def changes_since(catalog: Path | None, snapshot: int) -> tuple[list[str], dict[int, str]] | None:
    """What every snapshot after `snapshot` changed (DuckLake's `changes_made`), with the table
    names by id."""
    if catalog is None or not catalog.exists():
        return None
    with closing(_read_only(catalog)) as db:
        changes = [str(row[0]) for row in db.execute(
            "select changes_made from ducklake_snapshot_changes where snapshot_id > ?", [snapshot]).fetchall()]
        names = {int(row[0]): str(row[1]) for row in db.execute("select table_id, table_name from ducklake_table")}
    return changes, names


def recorded_data_path(catalog: Path | None) -> str | None:
    """The data path the catalog records (DuckLake keeps each file's path relative to it)."""
    if catalog is None or not catalog.exists():
        return None
    with closing(_read_only(catalog)) as db:
        row = db.execute(_DATA_PATH).fetchone()
    return str(row[0]) if row is not None else None


def repoint_data_path(catalog: Path, data_path: str) -> None:
    """Make the catalog's files relative to `data_path` (a moved folder's; DuckLake cannot change it)."""
    with closing(sqlite3.connect(catalog)) as db, db:
        db.execute("update ducklake_metadata set value = ? where key = 'data_path' and scope is null", [data_path])


__all__ = ["changes_since", "current_snapshot", "recorded_data_path", "repoint_data_path"]
