"""The ingest fast path (compiled incremental SQL over the new traces' partitions only) gives the
same marts as a dbt run over the whole warehouse."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES
from tracelake import warehouse as warehouse_module
from tracelake.ingest import parallel_decode
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

FIRST = TRACES / "torch_compile_triton" / "trace.json.gz"
SECOND = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
MARTS = ("kernels", "gpu_timeline", "gpu_timeline_all_events", "trace_quality", "ops_summary",
         "ops_summary_by_category", "ops_summary_by_module", "ops_summary_by_category_and_module", "ops_unique_args", "op_perf_instances", "profiler_steps", "op_perf", "runs",
         "module_calls", "module_call_events", "gpu_idle_gaps", "gpu_transfers", "gpu_event_exposure",
         "intermediate.int_cpu_op_ancestors", "intermediate.int_unified_op_rows", "intermediate.int_unified_ops", "intermediate.int_op_perf_models")


def _rows(db: duckdb.DuckDBPyConnection, table: str, trace_id: str) -> list[tuple]:
    columns = [c[0] for c in db.execute(f"describe {table}").fetchall() if c[0] not in ("ingested_at", "tags")]
    return db.execute(f"select {', '.join(columns)} from {table} where trace_id = ? order by all", [trace_id]).fetchall()


def _same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)  # parallel sums may differ in the last bits
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x == y


@pytest.fixture(scope="module")
def together(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """Both traces in one ingest (the shipped full-build plan), then rebuilt by a dbt run over every trace."""
    warehouse = Warehouse(tmp_path_factory.mktemp("together"))
    assert ingest_paths([FIRST, SECOND], warehouse, {}, jobs=2).model_update == "compiled"
    with warehouse.write_lock():
        warehouse.build(run_tests=False, full_refresh=True, threads=2)
    return warehouse


@pytest.mark.parametrize(("scoped", "jobs"), [(True, 1), (False, 1), (False, 3)],
                         ids=["scoped-sources", "all-sources", "forked-decode-workers"])
def test_fast_path_equals_a_dbt_run_over_every_trace(together: Warehouse, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, scoped: bool,
                                                     jobs: int) -> None:
    # scoping starts at SCOPED_UPDATE_MIN_OTHER_TRACES other traces; this warehouse has one
    monkeypatch.setattr(warehouse_module, "SCOPED_UPDATE_MIN_OTHER_TRACES", 1 if scoped else 2)
    # with workers, the warehouse is opened for the update in a thread while they decode
    monkeypatch.setattr(parallel_decode, "MIN_EVENTS_PER_WORKER", 1000)
    one_by_one = Warehouse(tmp_path / "one_by_one")
    ingest_paths([FIRST], one_by_one, {}, jobs=1)
    report = ingest_paths([SECOND], one_by_one, {}, jobs=jobs)
    assert report.model_update == "fast"
    trace_id = report.new_trace_ids[0]
    with together.connect_read_only() as a, one_by_one.connect_read_only() as b:
        for table in MARTS:
            expected, got = _rows(a, table, trace_id), _rows(b, table, trace_id)
            assert expected, table
            assert _same(expected, got), table
        # the raw views see every trace again once the update is committed
        assert b.execute("select count(distinct trace_id) from raw.events").fetchone() == (2,)
        assert b.execute("select count(*) from traces").fetchone() == (2,)
