"""An analysis' own copy of the lake rows it reads: native in-memory tables, not lake scans.

Reading a DuckLake table costs catalog queries on every scan (the snapshot, the table's stats, its
files pruned by column stats): 3-5 SQLite queries, 7-25 ms, against 0.5 ms for a DuckDB table; and
a view over the files themselves (`read_parquet`) costs its planning on every query that names it
(the job-collective query planned in 0.55 s over such views, 0.08 s over tables). An analysis
runs ~2,000 scans: on a 1 MB trace the catalog took 7 s of query time (DuckDB's DuckLakeMetadata
log) and the analysis ran 2.3x slower than on the classic layout.

So an analysis reads a working copy. When it opens, the catalog is asked once for the snapshot's
live tables, files, columns and views. Every table's rows of the analysis' traces are copied into
an in-memory DuckDB, read from the data files that can hold them (the catalog's min/max of
`trace_id` per file); then every lake view is created again there
from the SQL the catalog keeps. The in-memory database is the connection's default one, so every
name a query or a view uses resolves to the copy. The lake is attached as LAKE_ALIAS (read-only)
while the copy is made, then detached: an open catalog would hold off a writer's commit. A table
whose rows are not exactly its live files' rows (deletes, inlined rows, files shared across
snapshots, a column added after a file was written) is copied through the lake instead: slower,
never different.

An analysis' traces are its scope (`analysis_scope`): the analyzed traces, every rank of a job one
of them belongs to, and the graph captures a replay lists (or the replays that list a capture):
the marts of a trace read no other traces (tests/lake/test_working_copy.py checks every relation),
but those a model declares (dbt config meta `reads_other_traces`: op_best_observed, the faster run
of an op in another trace): their rows of the scope are computed by the lake, over the whole
warehouse, while the copy is made. Seeds and the plan table are copied whole.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

import duckdb

from tracelake.core.sql_text import sql_identifier, sql_literal
from tracelake.graph_captures import linked_captures
from tracelake.shipped_plan import trace_id_list
from tracelake.sql_guard import literal_glob

LAKE_ALIAS = "tracelake_lake"  # the lake, attached under this name while the copy is made
JOB_TAG = "job"
# A table whose scope's data files are larger stays a view over those files (DuckDB holds a copied
# table in memory: a 1 GB trace's raw events would add ~1 GB to the analysis' peak RSS).
WORKING_COPY_TABLE_MAX_BYTES = 32 * 1024 * 1024
_CATALOG_PLACEHOLDER = "{DUCKLAKE_CATALOG}"
_NAMED = re.compile(r'\{DUCKLAKE_CATALOG\}\."?(\w+)"?\."?(\w+)"?')


@dataclass
class _Table:
    schema: str
    name: str
    folder: str
    columns: list[str] = field(default_factory=list)  # in the lake's order
    files: list[tuple[str, str | None, str | None, int]] = field(default_factory=list)  # live files: trace_id range, bytes
    exact: bool = True  # its live files hold exactly its rows

    @property
    def relation(self) -> str:
        return f"{sql_identifier(self.schema)}.{sql_identifier(self.name)}"

    @property
    def scoped(self) -> bool:
        return "trace_id" in self.columns

    def kept_files(self, scope: list[str] | None) -> list[tuple[str, int]]:
        """Its files that may hold a row of `scope` (every file when None), with their sizes."""
        return [(path, size) for path, low, high, size in self.files if scope is None or low is None or high is None
                or any(low <= trace_id <= high for trace_id in scope)]

    @property
    def from_files(self) -> bool:
        """Whether it is read from its files: they hold exactly its rows (else through the lake)."""
        return self.exact and bool(self.files)

    def source(self, paths: list[str]) -> str:
        """What to read the table from: `paths` (its files, else its first file, for the columns),
        or the lake when its files do not hold exactly its rows."""
        if not self.from_files:
            return f"{LAKE_ALIAS}.{self.relation}"
        listed = ", ".join(sql_literal(literal_glob(path)) for path in paths or [self.files[0][0]])
        return f"read_parquet([{listed}], hive_partitioning = false)"


def _live(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return f"{prefix}begin_snapshot <= $snapshot and ({prefix}end_snapshot is null or {prefix}end_snapshot > $snapshot)"


def _joined(base: str, path: str, relative: bool) -> str:
    return base + path if relative else path


def trace_tags(con: duckdb.DuckDBPyConnection, trace_files: str) -> dict[str, dict[str, str]]:
    """Every trace's tags, from the relation `trace_files` (raw.trace_files)."""
    return {str(trace_id): dict(pairs or {}) for trace_id, pairs in
            con.execute(f"select trace_id, tags from {trace_files}").fetchall()}


def analysis_scope(tags: Mapping[str, Mapping[str, str]], trace_ids: Sequence[str]) -> list[str]:
    """The traces whose rows an analysis of `trace_ids` reads (module docstring), sorted; `tags`:
    every trace's tags."""
    scope: set[str] = set()
    waiting = [t for t in trace_ids if t in tags]
    while waiting:
        trace_id = waiting.pop()
        if trace_id in scope:
            continue
        scope.add(trace_id)
        own = tags[trace_id]
        related = {other for other, theirs in tags.items()
                   if (own.get(JOB_TAG) is not None and theirs.get(JOB_TAG) == own.get(JOB_TAG))
                   or trace_id in linked_captures(dict(theirs))}
        waiting += [t for t in related | linked_captures(dict(own)) if t in tags and t not in scope]
    return sorted(scope)


def _tables(con: duckdb.DuckDBPyConnection, meta: str, snapshot: int, data_path: str) -> dict[int, _Table]:
    live = {"snapshot": snapshot}
    rows = con.execute(
        f"select t.table_id, s.schema_name, t.table_name, s.path, s.path_is_relative, t.path, t.path_is_relative "
        f"from {meta}.ducklake_table t join {meta}.ducklake_schema s using (schema_id) "
        f"where {_live('t')} and {_live('s')}", live).fetchall()
    tables = {}
    for table_id, schema, name, schema_path, schema_relative, table_path, table_relative in rows:
        schema_folder = _joined(data_path, schema_path or "", bool(schema_relative))
        tables[int(table_id)] = _Table(schema, name, _joined(schema_folder, table_path or "", bool(table_relative)))
    for table_id, column in con.execute(
            f"select table_id, column_name from {meta}.ducklake_column where {_live()} and parent_column is null "
            "order by table_id, column_order", live).fetchall():
        if int(table_id) in tables:
            tables[int(table_id)].columns.append(column)
    return tables


def _place_files(con: duckdb.DuckDBPyConnection, meta: str, snapshot: int, tables: dict[int, _Table]) -> None:
    """Each table's live files, with the catalog's trace_id range of each."""
    rows = con.execute(
        f"select f.table_id, f.path, f.path_is_relative, (f.mapping_id is not null or f.partial_max is not null "
        f"or f.file_format <> 'parquet' or f.encryption_key is not null) as inexact, s.min_value, s.max_value, "
        f"f.file_size_bytes "
        f"from {meta}.ducklake_data_file f "
        f"left join {meta}.ducklake_column c on c.table_id = f.table_id and c.column_name = 'trace_id' "
        f"and {_live('c')} and c.parent_column is null "
        f"left join {meta}.ducklake_file_column_stats s on s.data_file_id = f.data_file_id and s.column_id = c.column_id "
        f"where {_live('f')} order by f.table_id, f.file_order nulls last, f.data_file_id", {"snapshot": snapshot}).fetchall()
    for table_id, path, relative, inexact, low, high, size in rows:
        table = tables.get(int(table_id))
        if table is not None:
            table.files.append((_joined(table.folder, path, bool(relative)), low, high, int(size or 0)))
            table.exact = table.exact and not inexact


def _mark_inexact(con: duckdb.DuckDBPyConnection, meta: str, snapshot: int, tables: dict[int, _Table]) -> None:
    """Tables with live deletes, inlined rows, or a column younger than one of their files."""
    live = {"snapshot": snapshot}
    inexact = {int(row[0]) for row in con.execute(
        f"select table_id from {meta}.ducklake_delete_file where {_live()} "
        f"union select table_id from {meta}.ducklake_inlined_data_tables", live).fetchall()}
    oldest_file = dict(con.execute(f"select table_id, min(begin_snapshot) from {meta}.ducklake_data_file "
                                   f"where {_live()} group by table_id", live).fetchall())
    newest_column = con.execute(f"select table_id, max(begin_snapshot) from {meta}.ducklake_column "
                                f"where {_live()} group by table_id", live).fetchall()
    inexact |= {int(table_id) for table_id, newest in newest_column
                if table_id in oldest_file and newest > oldest_file[table_id]}
    limits = {str(row[0]) for row in con.execute(
        f"select value from {meta}.ducklake_metadata where key = 'data_inlining_row_limit'").fetchall()}
    inlined_deletes = [] if limits == {"0"} else con.execute(  # a lake that never inlines has none (listing: 0.14 s)
        "select table_name from duckdb_tables() where database_name = ? and table_name like 'ducklake_inlined_delete_%'",
        [meta.strip('"')]).fetchall()
    for (inlined,) in inlined_deletes:
        table_id = int(inlined.rsplit("_", 1)[1])
        if table_id in tables and con.execute(f"select count(*) from {meta}.{sql_identifier(inlined)}").fetchone() != (0,):
            inexact.add(table_id)
    for table_id in inexact & set(tables):
        tables[table_id].exact = False


def _copy_table(con: duckdb.DuckDBPyConnection, table: _Table, scope: list[str]) -> None:
    """`table`'s rows of `scope` (every row of a table without trace_id) as a table of the copy,
    its columns in the lake's order. Their types are the files' own: DuckDB writes every type a
    mart has as itself (tests/lake/test_working_copy.py compares them with the lake's)."""
    kept = table.kept_files(scope if table.scoped else None)
    where = f" where trace_id in ({trace_id_list(scope)})" if table.scoped else ""
    if table.from_files and not kept:
        where = " where false"  # no file holds a row of the scope: its columns only
    listed = ", ".join(sql_identifier(name) for name in table.columns)
    # a table that large (a big trace's raw events) is read from its files where it is used, not held in memory
    kind = "view" if table.exact and sum(size for _, size in kept) > WORKING_COPY_TABLE_MAX_BYTES else "table"
    con.execute(f"create {kind} {table.relation} as select {listed} from {table.source([p for p, _ in kept])}{where}")


def _in_dependency_order(views: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The views, each after the views its SQL names (DuckDB binds a view when it is created)."""
    by_name = {(schema, name): (schema, name, sql) for schema, name, sql in views}
    ordered: list[tuple[str, str, str]] = []
    placed: set[tuple[str, str]] = set()

    def place(key: tuple[str, str], path: frozenset[tuple[str, str]]) -> None:
        if key in placed or key in path:
            return
        for named in _NAMED.findall(by_name[key][2]):
            if named in by_name:
                place(named, path | {key})
        placed.add(key)
        ordered.append(by_name[key])

    for key in by_name:
        place(key, frozenset())
    return ordered


def _create_views(con: duckdb.DuckDBPyConnection, views: Sequence[tuple[str, str, str]], catalog: str) -> None:
    for schema, name, sql in _in_dependency_order(views):
        con.execute(f"create view {sql_identifier(schema)}.{sql_identifier(name)} "
                    f"as {sql.replace(_CATALOG_PLACEHOLDER, sql_identifier(catalog))}")


def copy_scope(con: duckdb.DuckDBPyConnection, trace_ids: Sequence[str],
               whole: Collection[tuple[str, str]] = ()) -> tuple[int, list[str]]:
    """Fill `con`'s default database (in memory) with the working copy of the analysis of
    `trace_ids` over the lake attached as LAKE_ALIAS, at the snapshot it was attached at, then
    detach the lake (a reader's open catalog would hold off a writer's commit); returns that
    snapshot and the scope copied. The views `whole` names (schema, name) read other traces than
    the scope's: their rows of the scope are computed by the lake, over the whole warehouse."""
    meta = sql_identifier(f"__ducklake_metadata_{LAKE_ALIAS}")
    catalog_row = con.execute("select current_database()").fetchone()
    catalog = str(catalog_row[0]) if catalog_row else "memory"
    snapshot_row = con.execute(f"select id from ducklake_current_snapshot({sql_literal(LAKE_ALIAS)})").fetchone()
    snapshot = int(snapshot_row[0]) if snapshot_row else 0
    data_row = con.execute(f"select value from {meta}.ducklake_metadata where key = 'data_path' and scope is null").fetchone()
    tables = _tables(con, meta, snapshot, str(data_row[0]) if data_row else "")
    _place_files(con, meta, snapshot, tables)
    _mark_inexact(con, meta, snapshot, tables)
    trace_files = next(t for t in tables.values() if (t.schema, t.name) == ("raw", "trace_files"))
    scope = analysis_scope(trace_tags(con, trace_files.source([p for p, _ in trace_files.kept_files(None)])), trace_ids)
    views = con.execute(
        f"select s.schema_name, v.view_name, v.sql from {meta}.ducklake_view v join {meta}.ducklake_schema s "
        f"using (schema_id) where {_live('v')} and {_live('s')} and v.dialect = 'duckdb' order by v.view_id",
        {"snapshot": snapshot}).fetchall()
    for schema in sorted(({t.schema for t in tables.values()} | {schema for schema, _, _ in views}) - {"main"}):
        con.execute(f"create schema {sql_identifier(schema)}")
    for table in tables.values():
        _copy_table(con, table, scope)
    for schema, name, _ in views:
        if (schema, name) in whole:
            relation = f"{sql_identifier(schema)}.{sql_identifier(name)}"
            con.execute(f"create table {relation} as select * from {LAKE_ALIAS}.{relation} "
                        f"where trace_id in ({trace_id_list(scope)})")
    _create_views(con, [view for view in views if view[:2] not in whole], catalog)
    con.execute(f"detach {LAKE_ALIAS}")
    return snapshot, scope


_CHANGE = re.compile(r'(\w+):("[^"]*"\."[^"]*"|\d+)')


def only_ledger_changes(changes: Sequence[str], table_names: Mapping[int, str], ledger: Sequence[str]) -> bool:
    """Whether the snapshots whose `changes_made` are `changes` only created, inserted into or
    deleted from the analysis ledger tables `ledger` (`table_names`: table id -> name): a copy made
    before them still holds every row an analysis reads (the ledger is written, never read, by it)."""
    quoted = {f'"main"."{name}"' for name in ledger}
    for change in changes:
        for kind, value in _CHANGE.findall(change or ""):
            if kind == "created_table" and value in quoted:
                continue
            if kind in ("inserted_into_table", "deleted_from_table") and value.isdigit() \
                    and table_names.get(int(value)) in ledger:
                continue
            return False
        if _CHANGE.sub("", change or "").strip(", "):
            return False  # a change this reading does not know
    return True


__all__ = ["LAKE_ALIAS", "analysis_scope", "copy_scope", "only_ledger_changes", "trace_tags"]
