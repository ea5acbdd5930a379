"""The per-trace model update, run where the trace was staged (a Ray task) instead of on the driver.

The task loads its trace's staged tables into an embedded in-memory DuckDB whose catalog is named as
dbt compiled the models ("warehouse"), creates the seeds and the views the incremental models read,
then every incremental model of the shipped build plan over that one trace, and writes each model's
rows as Parquet into `<staging folder>/_models/<model>.parquet`. The driver then inserts those rows
instead of running the model's SELECT (tracelake/lakehouse.py `precomputed_models`).

Only a trace whose marts read no other trace can be modelled alone: a graph-replay trace reads its
capture traces, and a capture trace's tags change its replays (tracelake/graph_captures.py); those
are left to the driver, as is the ledger (trace_model_updates), whose time is the commit's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from tracelake.core.sql_text import sql_literal
from tracelake.graph_captures import CAPTURE_MODELLING_TAGS, REPLAY_MODELLING_TAGS
from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.lake_catalog import COMPILED_NAME
from tracelake.shipped_plan import ShippedPlans, select_for
from tracelake.sql_guard import literal_glob

MODELS_FOLDER = "_models"
DRIVER_ONLY_MODELS = frozenset({"trace_model_updates"})  # the ledger: its times are the commit's


def models_alone(tags: dict[str, str]) -> bool:
    """Whether a trace of these tags can be modelled without the other traces."""
    return not any(tag in tags for tag in (*REPLAY_MODELLING_TAGS, *CAPTURE_MODELLING_TAGS))


def raw_select(table: str, staged: StagedTrace) -> str:
    """The staged files of `table` as the raw table's rows (the trace id added)."""
    files = sorted((Path(staged.staging_dir) / table).glob("*.parquet"))
    listed = ", ".join(sql_literal(literal_glob(path.as_posix())) for path in files)
    return (f"select *, {sql_literal(staged.trace_id)}::varchar as trace_id "
            f"from read_parquet([{listed}], union_by_name = true)")


def model_in_task(staged: StagedTrace, plans: ShippedPlans) -> None:
    """Write every incremental model's rows of `staged` (one trace) into its staging folder."""
    out = Path(staged.staging_dir) / MODELS_FOLDER
    wanted = {m.relation for m in plans.incremental.models if m.name not in DRIVER_ONLY_MODELS}
    needed = _read_by(plans, wanted)
    try:
        out.mkdir()
        with duckdb.connect() as con:
            con.execute(f"attach ':memory:' as {COMPILED_NAME}")
            con.execute(f"use {COMPILED_NAME}")
            for schema in ("raw", *plans.build.schemas):
                con.execute(f'create schema if not exists "{schema}"')
            for table in TABLES:
                con.execute(f"create table raw.{table} as {raw_select(table, staged)}")
            for seed in plans.build.seeds:
                path = sql_literal(literal_glob(plans.seed_file(seed).as_posix()))
                con.execute(f"create table {seed.relation} as select * from read_parquet({path})")
            for node in plans.build.nodes:
                if node.relation not in needed:
                    continue
                if node.materialized == "incremental":
                    con.execute(f"create table {node.relation} as ({select_for(node.sql, [staged.trace_id])})")
                else:
                    con.execute(f"create {'view' if node.materialized == 'view' else 'table'} {node.relation} "
                                f"as ({node.sql.strip().rstrip(';')})")
            for model in plans.incremental.models:
                if model.relation in wanted:
                    target = sql_literal((out / f"{model.name}.parquet").as_posix())
                    con.execute(f"copy (select * from {model.relation}) to {target} (format parquet)")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # the driver then runs the models itself
        raise


def _read_by(plans: ShippedPlans, relations: set[str]) -> set[str]:
    """`relations` and every model relation they read, through views too."""
    depends = {node.relation: node.depends_on for node in plans.build.nodes}
    found: set[str] = set()
    waiting = list(relations)
    while waiting:
        relation = waiting.pop()
        if relation not in found and relation in depends:
            found.add(relation)
            waiting.extend(depends[relation])
    return found


def precomputed_models(staged: StagedTrace) -> dict[str, Path]:
    """Model name -> the Parquet file of its rows that a task wrote for `staged`; empty if none did."""
    folder = Path(staged.staging_dir) / MODELS_FOLDER
    return {path.stem: path for path in folder.glob("*.parquet")} if folder.is_dir() else {}
