"""Quality checks say what is special about each trace."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml  # dbt's own dependency

from tests.conftest import trace_id_of


def _checks(db, relative_path: str) -> dict[str, tuple[float, str]]:
    trace_id = trace_id_of(db, relative_path)
    rows = db.execute("select check_name, value, verdict from trace_quality where trace_id = ?", [trace_id]).fetchall()
    return {name: (value, verdict) for name, value, verdict in rows}


def test_gpu_only_trace_flags_missing_cpu_ops(db) -> None:
    checks = _checks(db, "mi210/gpu_only_trace/gpu_only_trace.json.gz")
    assert checks["cpu_ops_present"] == (0.0, "warn")
    assert checks["gpu_events_present"][1] == "pass"


def test_graph_replay_is_flagged(db) -> None:
    for path in ("inference/vllm_decode_full/graph_execution.json.gz", "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"):
        value, verdict = _checks(db, path)["graph_replay"]
        assert value >= 1 and verdict == "warn"


def test_unlinked_gpu_time_is_flagged(db) -> None:
    value, verdict = _checks(db, "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")["linked_gpu_time_share"]
    assert verdict == "warn" and 0.5 < value < 0.95
    value, verdict = _checks(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")["linked_gpu_time_share"]
    assert (value, verdict) == (1.0, "pass")


def test_compiled_trace_reports_triton_kernels(db) -> None:
    value, verdict = _checks(db, "torch_compile_triton/trace.json.gz")["compiled_kernels"]
    assert value > 0 and verdict == "info"


def test_distributed_trace_reports_its_rank(db) -> None:
    value, verdict = _checks(db, "mi300/resnet_act_checkpoint.json.gz")["distributed_info"]
    assert (value, verdict) == (1.0, "pass")


def test_clean_trace_has_no_warnings(db) -> None:
    checks = _checks(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")
    assert {name for name, (_, verdict) in checks.items() if verdict in ("warn", "fail")} == set()
    assert checks["dropped_events"] == (0.0, "pass")


def _scope_checks(scope_db, path) -> dict[str, tuple[float, str, str]]:
    rows = scope_db.execute("select q.check_name, q.value, q.verdict, q.detail from trace_quality q "
                            "join traces t using (trace_id) where t.source_path = ?", [str(path.resolve())]).fetchall()
    return {name: (value, verdict, detail) for name, value, verdict, detail in rows}


def _var(name: str) -> float:
    return float(yaml.safe_load((Path(__file__).parents[2] / "dbt_project.yml").read_text())["vars"][name])


def test_workload_traces_are_neither_harness_nor_capture(db) -> None:
    rows = db.execute("""
        select t.file_name, q.check_name, q.verdict from trace_quality q join traces t using (trace_id)
        where q.check_name in ('gpu_busy_share', 'graph_capture') and t.gpu_event_count > 0""").fetchall()
    assert len(rows) == 2 * db.execute("select count(*) from traces where gpu_event_count > 0").fetchone()[0]
    assert {(name, check) for name, check, verdict in rows if verdict != "pass"} == set()


def test_gpu_busy_share_is_busy_time_over_the_trace_span(db) -> None:
    trace_id = trace_id_of(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")
    busy_ms, span_us = db.execute("""
        select g.busy_time_ms, (select max(end_us) - min(ts_us) from events where trace_id = ? and phase = 'X')
        from gpu_timeline_all_events g where g.trace_id = ?""", [trace_id, trace_id]).fetchone()
    value, verdict = _checks(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")["gpu_busy_share"]
    assert value == pytest.approx(busy_ms * 1000.0 / span_us) and verdict == "pass" and value < 0.1  # 92 % idle, yet a workload


def test_single_iteration_traces_are_noted(db) -> None:
    assert _checks(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")["profiler_steps"] == (1.0, "info")
    assert _checks(db, "b200/eager_trace.json.gz")["profiler_steps"] == (0.0, "info")
    assert _checks(db, "mi300/resnet_act_checkpoint.json.gz")["profiler_steps"] == (3.0, "pass")


def test_default_platform_roofline_is_flagged(db, scope_db, scope_traces) -> None:
    assert _checks(db, "inference/vllm_decode_full/graph_execution.json.gz")["platform_detected"] == (0.0, "warn")
    assert _checks(db, "h100/gaunernst_bert-small-uncased__1016001.json.gz")["platform_detected"] == (1.0, "pass")
    assert _checks(db, "cpu_only/cpu_mlp_training.json.gz")["platform_detected"] == (0.0, "pass")  # no roofline drawn
    value, verdict, detail = _scope_checks(scope_db, scope_traces.unknown_device)["platform_detected"]
    assert (value, verdict) == (0.0, "warn") and "'Foo GPU'" in detail and "falls back to H100 (the default for a CUDA trace)" in detail


def test_capture_trace_is_flagged(scope_db, scope_traces) -> None:
    checks = _scope_checks(scope_db, scope_traces.capture)
    value, verdict, detail = checks["graph_capture"]
    assert value >= 1 and verdict == "warn" and "not the workload" in detail
    value, verdict, _ = checks["gpu_busy_share"]
    assert value < _var("min_gpu_busy_share") and verdict == "warn"  # 0.011 ms of GPU work in 34.5 ms
    value, verdict, detail = _scope_checks(scope_db, scope_traces.in_capture_folder)["graph_capture"]
    assert (value, verdict) == (0.0, "warn") and "capture_traces/ folder" in detail
    assert _scope_checks(scope_db, scope_traces.pipeline)["graph_capture"][1] == "pass"
