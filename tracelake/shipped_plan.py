"""The dbt project as dbt compiled it at development time, shipped with the package.

`tracelake/compiled/` holds what `dbt build` would run on an empty warehouse (the seeds as the
tables dbt loaded, every model's compiled SELECT in dependency order) and the incremental plan the
ingest fast path runs (written by `python -m tracelake.plan_compiler`; a test compiles the project
again and compares). A new warehouse executes the build plan directly: no dbt import, no parse, no
Jinja (~15 s -> well under a second). The plans carry the project's fingerprint: when the models
on disk differ (a user edited one), they are not used and dbt runs instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracelake.config import SHIPPED_DIR
from tracelake.dbt_runner import IncrementalPlan
from tracelake.plan_executor import PlanStep, run_steps
from tracelake.sql_guard import literal_glob

BUILD_PLAN_FILE = "build_plan.json"
INCREMENTAL_PLAN_FILE = "incremental_plan.json"
SEEDS_FOLDER = "seeds"


@dataclass(frozen=True)
class BuildNode:
    name: str
    relation: str
    materialized: str  # view | table | incremental
    sql: str
    depends_on: tuple[str, ...]  # relations of the models and seeds it reads


@dataclass(frozen=True)
class ShippedSeed:
    name: str
    relation: str
    path: Path


@dataclass(frozen=True)
class BuildPlan:
    """Read with plain json (like IncrementalPlan): the first ingest does not import pydantic."""

    fingerprint: str
    schemas: list[str]
    seeds: list[ShippedSeed]
    nodes: list[BuildNode]

    @classmethod
    def from_json(cls, text: str, folder: Path) -> BuildPlan:
        data = json.loads(text)
        return cls(data["fingerprint"], list(data["schemas"]),
                   [ShippedSeed(s["name"], s["relation"], folder / s["file"]) for s in data["seeds"]],
                   [BuildNode(n["name"], n["relation"], n["materialized"], n["sql"], tuple(n["depends_on"]))
                    for n in data["nodes"]])


@dataclass(frozen=True)
class ShippedPlans:
    build: BuildPlan
    incremental: IncrementalPlan
    incremental_json: str  # the incremental plan's file, copied into a warehouse it builds


def load_shipped_plans(fingerprint: str, folder: Path = SHIPPED_DIR) -> ShippedPlans | None:
    """The shipped plans when they were compiled from the project as it is now, else None."""
    try:
        build = BuildPlan.from_json((folder / BUILD_PLAN_FILE).read_text(), folder)
        incremental_json = (folder / INCREMENTAL_PLAN_FILE).read_text()
        incremental = IncrementalPlan.from_json(incremental_json)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if build.fingerprint != fingerprint or incremental.fingerprint != fingerprint:
        return None
    if not all(seed.path.is_file() for seed in build.seeds):
        return None
    return ShippedPlans(build, incremental, incremental_json)


def _existing_relations(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Quoted relation name -> 'table' | 'view', as dbt names relations in its compiled SQL."""
    rows = con.execute(
        """select '"' || database_name || '"."' || schema_name || '"."' || table_name || '"', 'table'
           from duckdb_tables() where not internal
           union all
           select '"' || database_name || '"."' || schema_name || '"."' || view_name || '"', 'view'
           from duckdb_views() where not internal"""
    ).fetchall()
    return dict(rows)


def _replace(con: duckdb.DuckDBPyConnection, existing: dict[str, str], relation: str, kind: str, select: str) -> None:
    """`create or replace` `relation` as a table or view; an object of the other kind goes first
    (a model whose materialization changed)."""
    other = existing.get(relation)
    if other is not None and other != kind:
        con.execute(f"drop {other} {relation}")
    con.execute(f"create or replace {kind} {relation} as ({select})")


def execute_build_plan(con: duckdb.DuckDBPyConnection, plans: ShippedPlans, trace_ids: list[str],
                       workers: int = 1) -> None:
    """Create every seed and model as `dbt build --full-refresh` would, over the warehouse's traces
    `trace_ids` (the raw views read exactly those), `workers` models at a time, each after the
    models it reads. Run on a writer's private copy of the database (a failure discards it).
    Tables and views of other names (findings, analyses) are left alone.

    An incremental model is created from its incremental SELECT of `trace_ids`: the plan compiler
    checked that it differs from the full build's only in that trace filter, which is true for
    every row here, and DuckDB plans the filtered query far better (a constant trace id reaches
    every join: module_calls of the resnet trace 1.1 s -> 0.05 s)."""
    plan = plans.build
    incremental = {model.relation: model for model in plans.incremental.models}
    existing = _existing_relations(con)
    for schema in plan.schemas:
        con.execute(f'create schema if not exists "{schema}"')
    for seed in plan.seeds:
        path = literal_glob(seed.path.as_posix()).replace("'", "''")
        _replace(con, existing, seed.relation, "table", f"select * from read_parquet('{path}')")

    def create(node: BuildNode) -> Callable[[duckdb.DuckDBPyConnection], None]:
        kind = "view" if node.materialized == "view" else "table"
        select = (incremental[node.relation].select_for(trace_ids) if node.materialized == "incremental"
                  else node.sql.strip().rstrip(";"))
        return lambda cursor: _replace(cursor, existing, node.relation, kind, select)

    steps = [PlanStep(node.relation, node.depends_on, create(node), heavy=node.materialized != "view")
             for node in plan.nodes]
    run_steps(con, steps, workers)
