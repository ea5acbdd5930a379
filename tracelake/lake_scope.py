"""A lakehouse model update whose cost is the new traces', whatever the warehouse holds.

New traces (`model_new_traces`): their rows of every incremental model are built in an in-memory
catalog attached to the writer's connection from their staged Parquet files alone (raw tables,
seeds, and the views and models the incremental models read, as the build plan makes them), then
appended to the lake's tables; nothing of the lake is read. Reading the lake filtered on the new
ids (below) scanned every raw row of the warehouse for a batch: trace ids are hashes, so the
`trace_id in (...)` of 100 ids spans every file's id range and prunes nothing; a batch of 100
cost 22 s of CPU into 200 traces and 52 s into 2,900 (bench/lake_scale.py). A trace whose marts
read other traces (a graph replay and its captures, tracelake/task_models.py `models_alone`)
cannot be modelled alone: its batch takes the path below.

Traces the lake holds (`scope_to_traces`: a re-model after a tag change, a batch with a replay):
the incremental models filter their inputs on the trace ids, but DuckDB does not push that filter
through every view, window and materialized CTE down to the raw tables: adding one small trace to
100 tiled traces scanned every trace's raw events (models 33 s against 8 s into a warehouse of
one). The classic layout narrows its raw views to the new traces' partitions for the update
(warehouse.py, SCOPED_UPDATE_MIN_OTHER_TRACES); a lakehouse cannot re-point a view without a
catalog change, which concurrent writers would conflict on. So the update's connection gets TEMP
views: a private copy of every view the incremental models read, whose staging views read
`raw.<table> where trace_id in (ids)`, and the models' SQL names those copies. Nothing is written
to the catalog; the temp views end with the connection.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import duckdb

from tracelake.core.sql_text import sql_literal
from tracelake.graph_captures import CAPTURE_MODELLING_TAGS, REPLAY_MODELLING_TAGS, linked_captures
from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.shipped_plan import ShippedPlans, select_for, trace_id_list
from tracelake.sql_guard import literal_glob

COMPILED_NAME = "warehouse"  # the catalog dbt compiled every relation under
SCRATCH = "tracelake_new_traces"  # the in-memory catalog of model_new_traces
RAW_SCHEMA = "raw"
_RELATION = re.compile(rf'"{COMPILED_NAME}"\."[^"]+"\."[^"]+"')


def _temp_name(relation: str) -> str:
    _, schema, name = (part.strip('"') for part in relation.split("."))
    return f'"temp"."main"."scoped__{schema}__{name}"'


def _views_read(plans: ShippedPlans) -> list[tuple[str, str]]:
    """(relation, SQL) of every view the incremental models read, directly or through other views,
    in the build plan's dependency order."""
    views = {node.relation: node.sql for node in plans.build.nodes if node.materialized == "view"}
    wanted: set[str] = set()
    pending = [model.sql for model in plans.incremental.models]
    while pending:
        for relation in _RELATION.findall(pending.pop()):
            if relation in views and relation not in wanted:
                wanted.add(relation)
                pending.append(views[relation])
    return [(node.relation, node.sql) for node in plans.build.nodes if node.relation in wanted]


def scope_to_traces(con: duckdb.DuckDBPyConnection, plans: ShippedPlans, trace_ids: list[str],
                    named: Callable[[str], str]) -> Callable[[str], str]:
    """Create the temp views on `con` for `trace_ids`; returns the rewrite of a model's compiled SQL
    (under COMPILED_NAME) that reads them, then names the lake's catalog with `named`. The views
    also see the capture traces the traces' replay tags list: a replay's marts read them."""
    id_list = trace_id_list(sorted(set(trace_ids) | _linked_captures(con, trace_ids, named)))
    views = _views_read(plans)
    swaps = {relation: _temp_name(relation) for relation, _ in views}
    swaps |= {f'"{COMPILED_NAME}"."{RAW_SCHEMA}"."{table}"':
              f'(select * from "{COMPILED_NAME}"."{RAW_SCHEMA}"."{table}" where trace_id in ({id_list}))'
              for table in TABLES}

    def rewrite(sql: str) -> str:
        return named(_RELATION.sub(lambda found: swaps.get(found.group(0), found.group(0)), sql))

    for relation, sql in views:
        view = _temp_name(relation).split(".", 2)[2]
        con.execute(f"create or replace temp view {view} as ({rewrite(sql.strip().rstrip(';'))})")
    return rewrite


def _linked_captures(con: duckdb.DuckDBPyConnection, trace_ids: list[str], named: Callable[[str], str]) -> set[str]:
    trace_files = named(f'"{COMPILED_NAME}"."{RAW_SCHEMA}"."trace_files"')
    rows = con.execute(f"select tags from {trace_files} where trace_id in ({trace_id_list(trace_ids)}) "
                       "and list_has_any(map_keys(tags), ?::varchar[])", [list(REPLAY_MODELLING_TAGS)]).fetchall()
    return {capture for (tags,) in rows for capture in linked_captures(dict(tags))}


def _read_by_models(plans: ShippedPlans) -> set[str]:
    """The incremental models and every relation they read, through views and tables too."""
    depends = {node.relation: node.depends_on for node in plans.build.nodes}
    found: set[str] = set()
    waiting = [model.relation for model in plans.incremental.models]
    while waiting:
        relation = waiting.pop()
        if relation not in found and relation in depends:
            found.add(relation)
            waiting.extend(depends[relation])
    return found


def _raw_rows(table: str, staged: list[StagedTrace]) -> str | None:
    """The staged files of `table` of every trace of `staged` as the raw table's rows, or None."""
    selects = []
    for trace in sorted(staged, key=lambda s: s.trace_id):
        files = sorted((Path(trace.staging_dir) / table).glob("*.parquet"))
        if files:
            listed = ", ".join(sql_literal(literal_glob(path.as_posix())) for path in files)
            selects.append(f"select *, {sql_literal(trace.trace_id)}::varchar as trace_id "
                           f"from read_parquet([{listed}], union_by_name = true)")
    return " union all by name ".join(selects) if selects else None


def model_new_traces(con: duckdb.DuckDBPyConnection, plans: ShippedPlans, staged: list[StagedTrace],
                     named: Callable[[str], str]) -> bool:
    """Append every incremental model's rows of the `staged` traces (not in the lake yet) to the
    lake's tables through `con` (in its transaction), built from their staged files alone. False,
    with nothing written, when a trace's marts read other traces (then `scope_to_traces`)."""
    scratch = con.cursor()  # its own transaction: one transaction writes one database
    scratch.execute(f"attach ':memory:' as {SCRATCH}")
    try:
        if not _build_in_scratch(scratch, plans, staged):
            return False
        for model in plans.incremental.models:
            con.execute(f"insert into {named(model.relation)} by name select * from {_in_scratch(model.relation)}")
        return True
    finally:
        scratch.execute(f"detach {SCRATCH}")
        scratch.close()


def _build_in_scratch(scratch: duckdb.DuckDBPyConnection, plans: ShippedPlans, staged: list[StagedTrace]) -> bool:
    """The raw tables, seeds, views and models the incremental models read, over `staged` alone,
    in the SCRATCH catalog; False when a trace's marts read other traces."""
    for schema in (RAW_SCHEMA, *plans.build.schemas):
        scratch.execute(f'create schema if not exists {SCRATCH}."{schema}"')
    for table in TABLES:
        rows = _raw_rows(table, staged)
        if rows is not None:
            scratch.execute(f'create table {SCRATCH}."{RAW_SCHEMA}"."{table}" as {rows}')
    modelling_tags = [*REPLAY_MODELLING_TAGS, *CAPTURE_MODELLING_TAGS]
    mixed = scratch.execute(f'select count(*) from {SCRATCH}."{RAW_SCHEMA}".trace_files '
                            "where list_has_any(map_keys(tags), ?::varchar[])", [modelling_tags]).fetchone()
    if mixed and mixed[0]:
        return False
    for seed in plans.build.seeds:
        path = sql_literal(literal_glob(plans.seed_file(seed).as_posix()))
        scratch.execute(f"create table {_in_scratch(seed.relation)} as select * from read_parquet({path})")
    ids = sorted(trace.trace_id for trace in staged)
    needed = _read_by_models(plans)
    for node in plans.build.nodes:
        if node.relation in needed:
            kind = "view" if node.materialized == "view" else "table"
            select = select_for(node.sql, ids) if node.materialized == "incremental" else node.sql.strip().rstrip(";")
            scratch.execute(f"create {kind} {_in_scratch(node.relation)} as ({_in_scratch(select)})")
    return True


def _in_scratch(sql: str) -> str:
    return sql.replace(f'"{COMPILED_NAME}".', f'"{SCRATCH}".')
