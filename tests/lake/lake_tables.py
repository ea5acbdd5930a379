"""Reading a lakehouse warehouse the way the lakehouse tests compare them: every relation's rows as a
sorted multiset, per-trace row counts, the snapshots, the data files the catalog references."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import duckdb

from tracelake.lakehouse import LakeWarehouse

# Columns that differ between two correct builds of the same traces: when (and how fast) each was
# ingested and modelled. Nothing else may differ.
CLOCK_COLUMNS = frozenset({"ingested_at", "models_updated_at", "parquet_committed_at", "ingest_seconds"})
# run_groups places untagged runs by ingest time: their label is the ingest time, their positions
# follow the order the writers happened to commit in (models/marts/run_groups.sql)
INGEST_ORDER_COLUMNS = {"main.run_groups": frozenset({"run_label", "trace_label", "run_index", "run_position",
                                                        "trace_position"})}
RAW_SCHEMA = "raw"


def connect(folder: Path, catalog: str | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the lake's current snapshot (`catalog`: its URL with the password)."""
    return LakeWarehouse(folder, catalog).connect_lake(read_only=True, own_instance=True)


def relations(con: duckdb.DuckDBPyConnection, schema: str) -> list[str]:
    rows = con.execute("select table_name from information_schema.tables where table_catalog = current_database() "
                       "and table_schema = ? order by 1", [schema]).fetchall()
    return [str(row[0]) for row in rows]


def _normal(value: object) -> object:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float(f"{value:.9g}")  # sums in another order: last digits
    if isinstance(value, list):
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _normal(v)) for k, v in value.items()))
    return value


def rows_of(con: duckdb.DuckDBPyConnection, schema: str, relation: str, where: str = "true") -> Counter[tuple[object, ...]]:
    """The relation's rows (without the clock columns; those `where` holds) as a multiset."""
    excluded = CLOCK_COLUMNS | INGEST_ORDER_COLUMNS.get(f"{schema}.{relation}", frozenset())
    columns = [str(c[0]) for c in con.execute(f'describe "{schema}"."{relation}"').fetchall() if c[0] not in excluded]
    listed = ", ".join(f'"{c}"' for c in columns)
    return Counter(tuple(_normal(v) for v in row)
                   for row in con.execute(f'select {listed} from "{schema}"."{relation}" where {where}').fetchall())


def every_relation(con: duckdb.DuckDBPyConnection, schemas: tuple[str, ...] = ("main", RAW_SCHEMA)
                   ) -> dict[str, Counter[tuple[object, ...]]]:
    return {f"{schema}.{name}": rows_of(con, schema, name) for schema in schemas for name in relations(con, schema)}


def trace_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every base table with a trace_id column: the raw tables and the incremental marts."""
    rows = con.execute("select distinct c.table_schema || '.' || c.table_name from information_schema.columns c "
                       "join information_schema.tables t using (table_catalog, table_schema, table_name) "
                       "where c.table_catalog = current_database() and c.column_name = 'trace_id' "
                       "and t.table_type = 'BASE TABLE' order by 1").fetchall()
    return [str(row[0]) for row in rows]


def counts_per_trace(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], int]:
    """(table, trace id) -> rows, over every table with a trace_id column."""
    counts: dict[tuple[str, str], int] = {}
    for table in trace_tables(con):
        for trace_id, count in con.execute(f"select trace_id, count(*) from {table} group by 1").fetchall():
            counts[(table, str(trace_id))] = int(count)
    return counts


def snapshots(con: duckdb.DuckDBPyConnection) -> list[tuple[int, dict[str, object]]]:
    rows = con.execute("select snapshot_id, changes from ducklake_snapshots(current_database()) order by 1").fetchall()
    return [(int(r[0]), dict(r[1] or {})) for r in rows]


def referenced_files(con: duckdb.DuckDBPyConnection) -> set[str]:
    """File names of every data and delete file any snapshot of the catalog references."""
    metadata = f"__ducklake_metadata_{con.execute('select current_database()').fetchone()[0]}"  # type: ignore[index]
    rows = con.execute(f'select path from "{metadata}".ducklake_data_file union all '
                       f'select path from "{metadata}".ducklake_delete_file').fetchall()
    return {Path(str(row[0])).name for row in rows}


def files_on_disk(folder: Path) -> set[str]:
    return {path.name for path in (folder / "lake").rglob("*.parquet")}
