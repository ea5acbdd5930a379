"""A lakehouse model update that reads only the new traces' raw rows, whatever the warehouse holds.

The incremental models filter their inputs on the new trace ids, but DuckDB does not push that filter
through every view, window and materialized CTE down to the raw tables: measured on 100 tiled traces
(bench/lake_scale.py), adding one small trace scanned every trace's raw events and its model update
took 33 s against 8 s into a warehouse of one trace. The classic layout narrows its raw views to the
new traces' partitions for the update (warehouse.py, SCOPED_UPDATE_MIN_OTHER_TRACES); a lakehouse
cannot re-point a view without a catalog change, which concurrent writers would conflict on. So the
update's connection gets TEMP views instead: a private copy of every view the incremental models
read, whose staging views read `raw.<table> where trace_id in (new ids)`, and the models' SQL names
those copies. Nothing is written to the catalog; the temp views end with the connection.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import duckdb

from tracelake.ingest.staged import TABLES
from tracelake.shipped_plan import ShippedPlans, trace_id_list

COMPILED_NAME = "warehouse"  # the catalog dbt compiled every relation under
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
    (under COMPILED_NAME) that reads them, then names the lake's catalog with `named`."""
    id_list = trace_id_list(trace_ids)
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
