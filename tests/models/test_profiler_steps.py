"""`profiler_steps` places a step's GPU side by the work it launched, not by its GPU-side annotation
(issue 28): on the MI300X resnet trace the GPU-side `ProfilerStep#N` is a 16 µs marker while each
step's 868 kernels run for 22.8 ms, and the GPU runs a step behind the host."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tracelake.dbt_runner import run_dbt
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
BERT_H100 = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
UNIT_TEST = "a_step_gpu_span_is_its_launched_work_not_its_gpu_annotation"


@pytest.fixture(scope="module")
def steps_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """The resnet (ROCm, three steps) and BERT H100 (CUDA, one step) traces, in the single-file layout
    dbt's unit tests run on."""
    wh = Warehouse(tmp_path_factory.mktemp("steps_warehouse"))
    assert not ingest_paths([RESNET, BERT_H100], wh, tags={"suite": "steps"}, jobs=1).failed
    return wh


def _steps(wh: Warehouse, file_name: str) -> list[tuple]:
    with wh.connect_read_only() as db:
        return db.execute(
            "select step_number, gpu_start_us, gpu_time_ms, gpu_annotation_time_ms, kernel_time_ms, span_start_us, "
            "span_end_us, host_start_us, host_time_ms from profiler_steps join traces using (trace_id) "
            "where file_name = ? order by step_number", [file_name]).fetchall()


def test_a_rocm_step_gpu_span_is_its_kernels_not_its_annotation_marker(steps_warehouse: Warehouse) -> None:
    steps = _steps(steps_warehouse, RESNET.name)
    assert [s[0] for s in steps] == [15, 16, 17]
    step16 = steps[1]
    # the GPU-side annotation is a 16 µs marker; the step's 868 kernels (22.8 ms of kernel time, some on
    # concurrent streams) run from the first to the last over 18.98 ms
    assert step16[3] == pytest.approx(0.0162, abs=1e-3)
    assert step16[4] == pytest.approx(22.83, abs=0.01)
    assert step16[2] == pytest.approx(18.98, abs=0.01)
    # the GPU runs a step behind: step 16's GPU work starts after its host side ended, where step 15's
    # ends (the GPU is never idle between them), and the step's span reaches to its last kernel
    assert step16[1] > step16[7] + 1000 * step16[8]
    assert step16[1] == pytest.approx(steps[0][1] + 1000 * steps[0][2], abs=0.01)
    assert step16[5] == step16[7] and step16[6] == pytest.approx(step16[1] + 1000 * step16[2])


def test_a_cuda_step_gpu_span_matches_the_annotation_kineto_draws_over_its_kernels(steps_warehouse: Warehouse) -> None:
    (step,) = _steps(steps_warehouse, BERT_H100.name)
    assert step[2] == pytest.approx(step[3], abs=1e-3) and step[2] > 3.0


def test_the_step_span_unit_test_runs_and_passes(steps_warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(steps_warehouse.db_path, copy)
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", "test_type:unit,profiler_steps"])
    statuses = {r.node.name: str(r.status) for r in result.results}
    assert statuses.get(UNIT_TEST) == "pass", statuses

