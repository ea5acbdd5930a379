"""A lakehouse warehouse's own commands: the Parquet files of a table's snapshot (`tracelake files`),
and `tracelake vacuum`, which keeps the number of files per table bounded and lets old snapshots go.

Other engines read the tables through `files`: a table's data files at a snapshot hold exactly its
rows there, as long as no row of them was deleted (a delete file would have to be applied), so
`files` refuses a table with deletes and `vacuum` rewrites those files first.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from tracelake.core.errors import WarehouseError
from tracelake.core.sql_text import sql_literal
from tracelake.lakehouse import LakeWarehouse
from tracelake.removal import no_readers
from tracelake.warehouse import Warehouse

# A data file no snapshot names is deleted once it is this old: younger, it may belong to a writer's
# transaction not yet committed (on another machine, through a PostgreSQL catalog). The longest
# batch commit measured is minutes (bench/README.md); an hour leaves a wide margin.
ORPHAN_GRACE_SECONDS = 3600.0


def require_lake(warehouse: Warehouse, what: str) -> LakeWarehouse:
    if not isinstance(warehouse, LakeWarehouse):
        warehouse.require_existing()
        raise WarehouseError(f"{what} needs a lakehouse warehouse; {warehouse.root} is the classic layout "
                             f"(warehouse.duckdb): `tracelake migrate --warehouse {warehouse.root} --to NEW_FOLDER` "
                             "makes a lakehouse of it")
    warehouse.require_existing()
    if warehouse.needs_repair():  # a moved folder's catalog re-pointed, dead staging removed
        warehouse.repair_if_idle()
    return warehouse


def check_snapshot(con: duckdb.DuckDBPyConnection, snapshot: int | None) -> None:
    """WarehouseError unless `snapshot` is one the catalog keeps."""
    if snapshot is None:
        return
    kept = [row[0] for row in con.execute(
        "select snapshot_id from ducklake_snapshots(current_database()) order by 1").fetchall()]
    if snapshot not in kept:
        span = f"{kept[0]}-{kept[-1]}" if kept else "none"
        raise WarehouseError(f"no snapshot {snapshot} in this warehouse (kept: {span}; "
                             "`tracelake vacuum` expires old ones)")


def _split(table: str) -> tuple[str, str]:
    schema, _, name = table.rpartition(".")
    return (schema or "main"), name


def table_files(warehouse: Warehouse, table: str, snapshot: int | None = None) -> list[str]:
    """The Parquet data files holding `table`'s rows at `snapshot` (default: the current one)."""
    lake = require_lake(warehouse, "`tracelake files`")
    schema, name = _split(table)
    with lake.connect_lake(read_only=True) as con:
        check_snapshot(con, snapshot)
        kind = con.execute("select table_type from information_schema.tables where table_catalog = current_database() "
                           "and table_schema = ? and table_name = ?", [schema, name]).fetchone()
        if kind is None:
            raise WarehouseError(f"no table {schema}.{name} in {lake.root}; its tables: `tracelake sql \"select "
                                 "table_schema, table_name from information_schema.tables\"`")
        if kind[0] != "BASE TABLE":
            raise WarehouseError(f"{schema}.{name} is a view, computed when read and stored in no file; "
                                 "`tracelake files` lists a table's files (read the view with `tracelake sql`)")
        at = f", snapshot_version => {int(snapshot)}" if snapshot is not None else ""
        rows = con.execute(f"select data_file, delete_file from ducklake_list_files(current_database(), "
                           f"{sql_literal(name)}, schema => {sql_literal(schema)}{at}) order by data_file").fetchall()
    deleted = sum(1 for _, delete_file in rows if delete_file)
    if deleted:
        raise WarehouseError(f"{schema}.{name} has deleted rows in {deleted} of its files at this snapshot, which "
                             "another engine would read as rows: run `tracelake vacuum` first")
    return [str(data_file) for data_file, _ in rows]


@dataclass(frozen=True)
class VacuumReport:
    snapshots_expired: int
    files_before: int
    files_after: int
    files_deleted: int
    deleted_now: bool  # False when a reader was open: the files of expired snapshots wait for the next vacuum


def _file_count(con: duckdb.DuckDBPyConnection) -> int:
    total = 0
    for schema, name in con.execute("select table_schema, table_name from information_schema.tables where "
                                    "table_catalog = current_database() and table_type = 'BASE TABLE'").fetchall():
        count = con.execute("select count(*) from ducklake_list_files(current_database(), ?, schema => ?)",
                            [name, schema]).fetchone()
        total += int(count[0]) if count else 0
    return total


def vacuum(warehouse: Warehouse, older_than_seconds: float) -> VacuumReport:
    """Rewrite data files that have deleted rows, merge small adjacent files, expire the snapshots
    older than `older_than_seconds` (never the current one), and delete the files no kept snapshot
    reads, unless a reader is open (caller holds the write lock)."""
    lake = require_lake(warehouse, "`tracelake vacuum`")
    with lake.connect_lake(read_only=False) as con:
        before = _file_count(con)
        con.execute("call ducklake_rewrite_data_files(current_database(), delete_threshold => 0)")
        con.execute("call ducklake_merge_adjacent_files(current_database())")
        expired = con.execute("call ducklake_expire_snapshots(current_database(), older_than => "
                              f"now() - to_seconds({float(older_than_seconds)}))").fetchall()
        deleted_now = no_readers(lake.root)
        deleted = 0
        if deleted_now:
            deleted += len(con.execute("call ducklake_cleanup_old_files(current_database(), cleanup_all => true)").fetchall())
            deleted += len(con.execute(  # files of dead transactions; not those a live writer elsewhere is writing
                "call ducklake_delete_orphaned_files(current_database(), older_than => "
                f"now() - to_seconds({float(ORPHAN_GRACE_SECONDS)}))").fetchall())
        after = _file_count(con)
    return VacuumReport(len(expired), before, after, deleted, deleted_now)
