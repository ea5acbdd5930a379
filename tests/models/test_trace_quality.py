"""Quality checks say what is special about each trace."""

from __future__ import annotations

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
