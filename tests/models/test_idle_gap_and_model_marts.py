"""The marts the cpu_idle analyzer, model identification and the finding windows read: their dbt unit tests (given /
expected rows for the rules with edge cases), and on the real traces, that they agree with the
idle-gap table they summarize."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from tracelake.dbt_runner import run_dbt
from tracelake.warehouse import Warehouse

UNIT_TESTED = ("int_gpu_idle_gaps_host_context", "gpu_idle_sync_calls", "gpu_idle_host_frames", "model_op_kinds")


def test_the_unit_tests_of_the_rules_pass(warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(warehouse.db_path, copy)
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *(f"test_type:unit,{m}" for m in UNIT_TESTED)])
    ran = [r.node.name for r in result.results]
    assert len(ran) == len(UNIT_TESTED), ran
    assert all(str(r.status) == "pass" for r in result.results), [(r.node.name, r.message) for r in result.results]


def test_the_gap_marts_add_up_to_the_gaps(db: duckdb.DuckDBPyConnection) -> None:
    by_gaps = dict(db.execute("select trace_id, count(*) from gpu_idle_gaps group by 1").fetchall())
    assert by_gaps, "the shared traces have idle gaps"
    assert dict(db.execute("select trace_id, gap_count from gpu_idle_gap_summary").fetchall()) == by_gaps
    by_reason = db.execute("select trace_id, sum(gap_count) from gpu_idle_gap_reasons group by 1").fetchall()
    assert dict(by_reason) == by_gaps


@pytest.mark.parametrize("mart, gap_filter", [
    ("gpu_idle_sync_calls", "gap_class = 'sync_blocked' or gap_class_reason = 'launched_after_sync_returned'"),
    ("gpu_idle_host_frames", "gap_class = 'host_work' and coalesce(start_python_function_name, start_cpu_op_name) is not null"),
])
def test_each_gap_counts_once_per_side(db: duckdb.DuckDBPyConnection, mart: str, gap_filter: str) -> None:
    side = "where side = 'gap start'" if mart == "gpu_idle_host_frames" else ""
    counted = db.execute(f"select coalesce(sum(gap_count), 0) from {mart} {side}").fetchone()[0]
    assert counted == db.execute(f"select count(*) from gpu_idle_gaps where {gap_filter}").fetchone()[0]


def test_op_kinds_have_one_row_per_trace(db: duckdb.DuckDBPyConnection) -> None:
    assert db.execute("select count(*) from model_op_kinds").fetchone() == db.execute("select count(*) from traces").fetchone()
    assert db.execute("select sum(cpu_ops) from model_op_kinds").fetchone() == db.execute("select count(*) from cpu_ops").fetchone()


def test_claim_targets_are_every_gpu_event_and_every_gap(db: duckdb.DuckDBPyConnection) -> None:
    targets = dict(db.execute("select kind, count(*) from gpu_claim_targets group by 1").fetchall())
    assert targets == {"gpu_event": db.execute("select count(*) from kernels").fetchone()[0],
                       "idle_gap": db.execute("select count(*) from gpu_idle_gaps").fetchone()[0]}
