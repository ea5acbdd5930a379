"""The raw.<table> views dbt's sources read: one per ingested table, over a list of Parquet files."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tracelake.sql_guard import literal_glob


def file_list(files: list[Path]) -> str:
    """The SQL list items of `files`, each named as itself (no glob character of its name matches)."""
    return ", ".join("'" + literal_glob(path.as_posix()).replace("'", "''") + "'" for path in files)


def refresh_raw_views(con: duckdb.DuckDBPyConnection, files_by_table: dict[str, str], keep_current: bool) -> None:
    """raw.<table> over each table's file list (SQL); with `keep_current`, a view that already reads
    exactly those files stays as it is."""
    existing = dict(
        con.execute("select view_name, sql from duckdb_views() where schema_name = 'raw'").fetchall()
    )
    con.execute("create schema if not exists raw")
    for table, files in files_by_table.items():
        if keep_current and f"list_value({files})" in existing.get(table, ""):
            continue
        con.execute(
            f"create or replace view raw.{table} as select * from read_parquet([{files}], "
            "hive_partitioning = true, union_by_name = true, hive_types = {'trace_id': varchar})"
        )
