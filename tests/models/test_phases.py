"""`phases`: serving steps, their phase, batch, tokens, GPU time and steady state, on the mixed
prefill/decode trace built from the real SGLang decode trace (tests/data/phases/README.md) and on
the real serving traces; and the report's phase table and per-phase findings."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.conftest import DATA, run_cli
from tracelake.lakehouse import open_warehouse

MIXED = DATA / "phases" / "sglang_prefill_decode.json.gz"
DECODE_ONLY_ADVICE = "Batch more decode requests per step"


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The mixed trace analyzed once: (warehouse folder, output folder)."""
    root = tmp_path_factory.mktemp("phases")
    result = run_cli("analyze", str(MIXED), "--warehouse", str(root / "wh"), "--out", str(root / "out"))
    assert result.returncode == 0, result.stderr
    return root / "wh", root / "out"


@pytest.fixture(scope="module")
def mixed_db(analyzed: tuple[Path, Path]):
    con = open_warehouse(analyzed[0]).connect_read_only()
    yield con
    con.close()


def _steps(db: duckdb.DuckDBPyConnection) -> list[tuple]:
    return db.execute("select step_index, step_source, phase, batch_size, prefill_tokens, decode_tokens, kv_tokens, "
                      "in_steady_state from phases order by step_index").fetchall()


def test_each_step_gets_its_phase_batch_and_tokens(mixed_db) -> None:
    assert _steps(mixed_db) == [
        (1, "annotation", "prefill", 15, 15360, 0, 15360, True),   # 1 prefill step: too few to drop one
        (2, "annotation", "decode", 32, 0, 32, 32785, False),      # first of 3 decode steps: warm-up
        (3, "annotation", "decode", 32, 0, 32, 32785, True),
        (4, "annotation", "decode", 32, 0, 32, 32785, True),
        (5, "annotation", "mixed", 4, 1024, 3, 4096, True),
    ]


def test_a_step_annotation_holding_the_window_edge_measures_only_its_own_gpu_work(mixed_db) -> None:
    """The SGLang step annotation spans 465 ms, 463 ms of it a window-edge idle gap; the step's
    own GPU span is the 10.45 ms graph replay, 9.77 ms of it busy."""
    host_ms, gpu_us, busy_us, idle_us, busy_pct = mixed_db.execute(
        "select host_time_ms, gpu_time_us, gpu_busy_us, gpu_idle_us, gpu_busy_percent from phases "
        "where step_index = 1").fetchone()
    assert host_ms > 460 and gpu_us == pytest.approx(10450, abs=5) and busy_us == pytest.approx(9769, abs=5)
    assert idle_us == pytest.approx(gpu_us - busy_us) and busy_pct == pytest.approx(93.5, abs=0.1)
    edge = mixed_db.execute("select count(*) from gpu_idle_gaps where gap_class = 'window_edge'").fetchone()[0]
    assert edge == 1


def test_every_launched_kernel_belongs_to_one_step(mixed_db) -> None:
    linked, in_steps = mixed_db.execute(
        "select (select count(*) from kernels where is_linked), (select count(*) from phase_kernels)").fetchone()
    assert in_steps == linked
    counts = dict(mixed_db.execute("select step_index, kernel_count from phases").fetchall())
    per_step = dict(mixed_db.execute("select step_index, count(*) from phase_kernels group by 1").fetchall())
    assert counts == per_step


def test_the_report_has_a_phase_table_and_the_rule(analyzed) -> None:
    text = (analyzed[1] / "analysis.md").read_text()
    summary = text.split("## Executive Summary", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| prefill") or line.startswith("| decode")
            or line.startswith("| mixed")]
    assert rows == [
        "| prefill | 1 | 1 of 1 | 15 | 15,360 | 10.450 | 10.450 | 93.5 |",
        "| mixed | 1 | 1 of 1 | 4 | 1,027 | 10.058 | 10.058 | 96.7 |",
        "| decode | 3 | 2 of 3 | 32 | 32 | 10.058 | 20.116 | 96.7 |",
    ]
    assert "the first 1 step(s) of each phase are warm-up when the phase has at least 3 steps" in summary


def test_every_finding_card_says_its_phase_and_no_decode_advice_reaches_a_non_decode_phase(analyzed) -> None:
    text = (analyzed[1] / "analysis.md").read_text()
    cards = text.split('<a id="p')[1:]
    assert cards and all("**Phase**: " in card.split("*Details:")[0] for card in cards)
    for card in cards:
        phase = card.split("**Phase**: ", 1)[1].splitlines()[0]
        if phase != "decode (batch 32)":
            assert DECODE_ONLY_ADVICE not in card


def test_a_prefill_only_trace_gets_prefill_not_decode_advice(analyzed, tmp_path: Path) -> None:
    """The mixed trace cut to its first (prefill) step: no decode advice anywhere, every card says prefill."""
    import gzip
    import json
    trace = json.loads(gzip.decompress(MIXED.read_bytes()))
    prefill_end = max(e["ts"] + e["dur"] for e in trace["traceEvents"]
                      if e.get("cat") == "user_annotation" and e["name"].startswith("execute_15360"))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("ph") == "M" or e.get("ts", 0) <= prefill_end]
    path = tmp_path / "prefill_only.json.gz"
    path.write_bytes(gzip.compress(json.dumps(trace).encode()))
    result = run_cli("analyze", str(path), "--warehouse", str(tmp_path / "wh"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "out" / "analysis.md").read_text()
    assert DECODE_ONLY_ADVICE not in text
    assert "**Phase**: prefill (batch 15)" in text


@pytest.mark.parametrize(("trace", "expected"), [
    ("inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz", ("decode", 32, 0, 32, 32785)),
    ("inference/vllm_decode_full/graph_execution.json.gz", ("decode", 32, 0, 32, 55086)),
    ("b200/eager_trace.json.gz", ("prefill", 1, 888, 0, None)),
])
def test_the_real_serving_traces_have_one_step_of_their_phase(built_once, trace, expected) -> None:
    con = open_warehouse(built_once(DATA / "traces" / trace)).connect_read_only()
    try:
        rows = con.execute("select phase, batch_size, prefill_tokens, decode_tokens, kv_tokens, in_steady_state "
                           "from phases").fetchall()
    finally:
        con.close()
    assert rows == [(*expected, True)]


def test_a_training_trace_has_profiler_steps_without_phase(built_once) -> None:
    con = open_warehouse(built_once(DATA / "traces" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz")).connect_read_only()
    try:
        rows = con.execute("select step_source, phase from phases").fetchall()
    finally:
        con.close()
    assert rows and all(r == ("profiler_step", None) for r in rows)
