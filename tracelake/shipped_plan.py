"""The compiled plan's one home: what dbt compiled from the project, its file schema, where it is
stored, reading and writing it, and executing it.

Two plans, each valid for one fingerprint of the project's files:

- the build plan: what `dbt build --full-refresh` runs on an empty warehouse (the schemas, the seeds
  as the tables dbt loaded, every model's compiled SELECT in dependency order). A new warehouse
  executes it directly: no dbt import, no parse, no Jinja (~15 s -> well under a second);
- the incremental plan: the incremental models' SELECT of the new traces (their ids a placeholder) in
  dependency order, which every later ingest executes for the new trace ids.

Both ship with the package in tracelake/compiled/ (written by `python -m tracelake.plan_compiler`; a
test compiles the project again and compares), laid out so that a change to one model reads as a
change to that model's file in a diff:

    plan.json             the index: fingerprint, schemas, seeds, the build's models in order (relation,
                          materialization, what each reads), then the incremental plan's order
    models/<name>.sql     each model's SQL as dbt compiled it; an incremental model's is its incremental
                          SELECT, which the build runs over every trace (the compiler checked that the
                          full build's SELECT differs from it only in that trace filter)
    seeds/<name>.parquet  each seed as dbt loaded it (dbt's column types)

A warehouse keeps its incremental plan in one file (dbt/plan.json, SQL inline, written whole by a
rename): the shipped one, or the one dbt compiled after a build of an edited project. When the
project on disk differs from the shipped plans' (a user edited a model), they are not used and dbt
runs instead. Reading uses msgspec, which the ingest imports anyway (pydantic would add ~70 ms).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import duckdb
import msgspec

from tracelake.config import SHIPPED_DIR
from tracelake.core.errors import WarehouseError
from tracelake.plan_executor import PlanStep, run_steps
from tracelake.sql_guard import literal_glob

INDEX_FILE = "plan.json"
MODELS_FOLDER = "models"
SEEDS_FOLDER = "seeds"
NEW_TRACE_IDS_PLACEHOLDER = "@@NEW_TRACE_IDS@@"
_TRACE_ID = re.compile(r"^[0-9a-f]{16}$")
Materialization = Literal["view", "table", "incremental"]


def trace_id_list(trace_ids: list[str]) -> str:
    """`trace_ids` as a SQL list of literals, each checked to be a trace id first."""
    for trace_id in trace_ids:
        if not _TRACE_ID.match(trace_id):
            raise WarehouseError(f"refusing malformed trace id {trace_id!r}")
    return ", ".join(f"'{trace_id}'" for trace_id in trace_ids)


def select_for(sql: str, trace_ids: list[str]) -> str:
    """An incremental SELECT of the rows of `trace_ids` (checked trace ids, placeholder filled in)."""
    return sql.replace(f"'{NEW_TRACE_IDS_PLACEHOLDER}'", trace_id_list(trace_ids)).strip().rstrip(";")


# ---- the incremental plan: a warehouse's dbt/plan.json, and the order part of the shipped index


class PlannedModel(msgspec.Struct, frozen=True):
    name: str
    relation: str
    sql: str  # its SELECT of the new traces, whose ids are NEW_TRACE_IDS_PLACEHOLDER
    depends_on: tuple[str, ...] = ()  # relations of the planned models it reads (through views too)

    def select_for(self, trace_ids: list[str]) -> str:
        return select_for(self.sql, trace_ids)


class IncrementalPlan(msgspec.Struct, frozen=True):
    """Compiled incremental models in dependency order, valid for one project fingerprint."""

    fingerprint: str
    models: list[PlannedModel]

    @classmethod
    def from_json(cls, text: str | bytes) -> IncrementalPlan:
        """A warehouse's plan file; ValueError when it is not one."""
        try:
            stored: _StoredIncrementalPlan = msgspec.json.decode(text, type=_StoredIncrementalPlan)
        except msgspec.DecodeError as exc:
            raise ValueError(f"not an incremental plan: {exc}") from None
        models: list[PlannedModel] = []
        for model in stored.models:
            # a plan written before dependencies were recorded: each model after all before it
            depends_on = model.depends_on if model.depends_on is not None else [m.relation for m in models]
            models.append(PlannedModel(model.name, model.relation, model.sql, tuple(depends_on)))
        return cls(stored.fingerprint, models)

    def to_json(self) -> str:
        return _json(self)


class _StoredPlannedModel(msgspec.Struct, frozen=True):
    name: str
    relation: str
    sql: str
    depends_on: list[str] | None = None


class _StoredIncrementalPlan(msgspec.Struct, frozen=True):
    fingerprint: str
    models: list[_StoredPlannedModel]


# ---- the build plan and the shipped folder


class SeedEntry(msgspec.Struct, frozen=True):
    name: str  # its table is seeds/<name>.parquet
    relation: str


class ModelEntry(msgspec.Struct, frozen=True):
    name: str  # its SQL is models/<name>.sql
    relation: str
    materialized: Materialization
    depends_on: tuple[str, ...]  # relations of the models and seeds it reads
    # its rows of a trace read other traces than the trace's scope (dbt config meta): an analysis'
    # working copy takes them from the whole warehouse (tracelake/lake_reader.py)
    reads_other_traces: bool


class BuildNode(ModelEntry, frozen=True):
    # the SELECT the build runs: dbt's full build, or for an incremental model its incremental SELECT
    # (NEW_TRACE_IDS_PLACEHOLDER for the trace ids), which the build fills with every trace
    sql: str


class IncrementalEntry(msgspec.Struct, frozen=True):
    name: str  # a model of the build whose materialization is incremental
    depends_on: tuple[str, ...]  # relations of the planned models it reads (through views too)


class PlanIndex(msgspec.Struct, frozen=True):
    """tracelake/compiled/plan.json."""

    fingerprint: str
    schemas: list[str]
    seeds: list[SeedEntry]
    build: list[ModelEntry]  # dependency order
    incremental: list[IncrementalEntry]  # dependency order


class BuildPlan(msgspec.Struct, frozen=True):
    fingerprint: str
    schemas: list[str]
    seeds: list[SeedEntry]
    nodes: list[BuildNode]  # dependency order


class ShippedPlans(msgspec.Struct, frozen=True):
    folder: Path  # where the seeds' Parquet files are
    build: BuildPlan
    incremental: IncrementalPlan

    def seed_file(self, seed: SeedEntry) -> Path:
        return self.folder / SEEDS_FOLDER / f"{seed.name}.parquet"

    @property
    def incremental_json(self) -> str:
        """The incremental plan as a warehouse keeps it (dbt/plan.json)."""
        return self.incremental.to_json()


def _json(value: msgspec.Struct) -> str:
    return msgspec.json.format(msgspec.json.encode(value), indent=1).decode() + "\n"


def _model_file(folder: Path, name: str) -> Path:
    return folder / MODELS_FOLDER / f"{name}.sql"


def _read_index(folder: Path) -> PlanIndex:
    try:
        return msgspec.json.decode((folder / INDEX_FILE).read_bytes(), type=PlanIndex)
    except msgspec.DecodeError as exc:
        raise ValueError(f"{folder / INDEX_FILE}: not a plan index: {exc}") from None


def _read_sql(folder: Path, name: str) -> str:
    text = _model_file(folder, name).read_bytes().decode()
    if not text.endswith("\n"):
        raise ValueError(f"{_model_file(folder, name)}: not written by the plan compiler (no final newline)")
    return text[:-1]  # the one newline the writer adds


def read_compiled_plan(folder: Path) -> ShippedPlans:
    """The plans compiled into `folder`; OSError or ValueError when it holds none, or a broken one."""
    return _plans_from_index(_read_index(folder), folder)


def _plans_from_index(index: PlanIndex, folder: Path) -> ShippedPlans:
    nodes = [BuildNode(e.name, e.relation, e.materialized, e.depends_on, e.reads_other_traces, _read_sql(folder, e.name))
             for e in index.build]
    by_name = {node.name: node for node in nodes}
    planned: list[PlannedModel] = []
    for entry in index.incremental:
        node = by_name.get(entry.name)
        if node is None or node.materialized != "incremental":
            raise ValueError(f"{folder / INDEX_FILE}: incremental model {entry.name} is no incremental model of the build")
        planned.append(PlannedModel(node.name, node.relation, node.sql, entry.depends_on))
    build = BuildPlan(index.fingerprint, index.schemas, index.seeds, nodes)
    return ShippedPlans(folder, build, IncrementalPlan(index.fingerprint, planned))


def load_shipped_plans(fingerprint: str, folder: Path = SHIPPED_DIR) -> ShippedPlans | None:
    """The shipped plans when they were compiled from the project as it is now, else None."""
    try:
        index = _read_index(folder)
        if index.fingerprint != fingerprint:
            return None
        plans = _plans_from_index(index, folder)
    except (OSError, ValueError):
        return None
    if not all(plans.seed_file(seed).is_file() for seed in plans.build.seeds):
        return None
    return plans


def shipped_fingerprint(folder: Path = SHIPPED_DIR) -> str:
    """The fingerprint of the project the shipped plans were compiled from; OSError or ValueError
    when there are none."""
    return _read_index(folder).fingerprint


def write_compiled_plan(folder: Path, build: BuildPlan, incremental: IncrementalPlan,
                        seeds_from: duckdb.DuckDBPyConnection) -> None:
    """Write the plans into the new folder `folder`, each seed copied from its table in `seeds_from`."""
    if incremental.fingerprint != build.fingerprint:
        raise ValueError("the build and the incremental plan are of different projects")
    sql_of = {node.name: node.sql for node in build.nodes if node.materialized == "incremental"}
    for model in incremental.models:
        if sql_of.get(model.name) != model.sql:
            raise ValueError(f"incremental model {model.name}: its SQL is not the build's for it")
    (folder / MODELS_FOLDER).mkdir(parents=True)
    (folder / SEEDS_FOLDER).mkdir()
    plans = ShippedPlans(folder, build, incremental)
    for seed in build.seeds:
        path = plans.seed_file(seed).as_posix().replace("'", "''")
        seeds_from.execute(f"copy (select * from {seed.relation}) to '{path}' (format parquet)")
    for node in build.nodes:
        _model_file(folder, node.name).write_bytes((node.sql + "\n").encode())
    index = PlanIndex(
        fingerprint=build.fingerprint,
        schemas=build.schemas,
        seeds=build.seeds,
        build=[ModelEntry(n.name, n.relation, n.materialized, n.depends_on, n.reads_other_traces) for n in build.nodes],
        incremental=[IncrementalEntry(m.name, m.depends_on) for m in incremental.models],
    )
    (folder / INDEX_FILE).write_text(_json(index))


# ---- executing the plans


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
    existing = _existing_relations(con)
    for schema in plan.schemas:
        con.execute(f'create schema if not exists "{schema}"')
    for seed in plan.seeds:
        path = literal_glob(plans.seed_file(seed).as_posix()).replace("'", "''")
        _replace(con, existing, seed.relation, "table", f"select * from read_parquet('{path}')")

    def create(node: BuildNode) -> Callable[[duckdb.DuckDBPyConnection], None]:
        kind = "view" if node.materialized == "view" else "table"
        select = select_for(node.sql, trace_ids) if node.materialized == "incremental" else node.sql.strip().rstrip(";")
        return lambda cursor: _replace(cursor, existing, node.relation, kind, select)

    steps = [PlanStep(node.relation, node.depends_on, create(node), heavy=node.materialized != "view")
             for node in plan.nodes]
    run_steps(con, steps, workers)


def execute_plan(con: duckdb.DuckDBPyConnection, plan: IncrementalPlan, trace_ids: list[str],
                 scope_sources: Callable[[list[str] | None], None] = lambda _: None, workers: int = 1) -> None:
    """Replace the rows of `trace_ids` in every incremental model, `workers` models at a time, each
    after the models it reads. Run on a writer's private copy of the database: a failure leaves
    it part-updated, and the copy is discarded.

    `scope_sources(trace_ids)` narrows the raw sources to the new traces for the inserts and
    `scope_sources(None)` widens them again afterwards."""
    if not trace_ids:
        return
    id_list = trace_id_list(trace_ids)  # checked before any statement runs

    def replace_rows(model: PlannedModel) -> Callable[[duckdb.DuckDBPyConnection], None]:
        def run(cursor: duckdb.DuckDBPyConnection) -> None:
            cursor.begin()
            cursor.execute(f"delete from {model.relation} where trace_id in ({id_list})")
            cursor.execute(f"insert into {model.relation} by name select * from ({model.select_for(trace_ids)})")
            cursor.commit()
        return run

    scope_sources(trace_ids)
    run_steps(con, [PlanStep(m.relation, m.depends_on, replace_rows(m)) for m in plan.models], workers)
    scope_sources(None)
