"""`runs` (tags, detected mode, GPU breakdown per trace) and `profiler_steps` on the real traces."""

from __future__ import annotations

import duckdb
import pytest

from tests.conftest import trace_id_of

RESNET = "mi300/resnet_act_checkpoint.json.gz"
BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"


def test_resnet_has_three_profiler_steps_with_the_work_they_launched(db: duckdb.DuckDBPyConnection) -> None:
    trace_id = trace_id_of(db, RESNET)
    steps = db.execute(
        "select step_number, kernel_count, kernel_time_ms, host_time_ms from profiler_steps "
        "where trace_id = ? order by step_number", [trace_id]).fetchall()
    assert [s[0] for s in steps] == [15, 16, 17]
    # the same training step three times: the same launches, kernel time within a few percent
    assert len({s[1] for s in steps}) == 1 and steps[0][1] > 500
    times = [s[2] for s in steps]
    assert max(times) / min(times) < 1.05
    # no GPU work is counted twice: the steps hold at most every linked GPU event of the trace
    linked_ms = db.execute("select sum(dur_us) / 1000 from kernels where trace_id = ? and is_linked",
                           [trace_id]).fetchone()[0]
    assert sum(times) <= linked_ms + 1e-9


def test_single_step_trace_attributes_all_its_launched_work(db: duckdb.DuckDBPyConnection) -> None:
    trace_id = trace_id_of(db, BERT_H100)
    (count, time_ms), = db.execute(
        "select kernel_count, kernel_time_ms from profiler_steps where trace_id = ?", [trace_id]).fetchall()
    linked = db.execute("select count(*), sum(dur_us) / 1000 from kernels where trace_id = ? and is_linked",
                        [trace_id]).fetchone()
    assert (count, time_ms) == pytest.approx(linked)


@pytest.mark.parametrize(("trace", "mode"), [
    (RESNET, "training"),
    ("cpu_only/cpu_mlp_training.json.gz", "training"),
    (BERT_H100, "inference"),
    ("inference/vllm_decode_full/graph_execution.json.gz", "inference-graph"),
])
def test_runs_detects_training_from_backward_ops(db: duckdb.DuckDBPyConnection, trace: str, mode: str) -> None:
    row = db.execute("select mode, mode_source, model from runs where trace_id = ?", [trace_id_of(db, trace)]).fetchone()
    assert row == (mode, "detected", None)


def test_runs_carries_the_gpu_timeline_and_tags(db: duckdb.DuckDBPyConnection) -> None:
    mismatched = db.execute("""
        select count(*) from runs join gpu_timeline using (trace_id)
        where runs.total_time_ms is distinct from gpu_timeline.total_time_ms
           or runs.idle_time_percent is distinct from gpu_timeline.idle_time_percent""").fetchone()[0]
    assert mismatched == 0
    assert db.execute("select count(*) from runs").fetchone() == db.execute("select count(*) from traces").fetchone()
    assert db.execute("select bool_and(tags['suite'] = 'tests') from runs").fetchone()[0]
    gpu_only = db.execute("select mode, mode_source from runs where trace_id = ?",
                          [trace_id_of(db, "mi210/gpu_only_trace/gpu_only_trace.json.gz")]).fetchone()
    assert gpu_only == (None, "unknown")
