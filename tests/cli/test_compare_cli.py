"""`tracelake compare`: regression verdicts on real traces and slowed-down copies of them."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tracelake.lakehouse import LakeWarehouse, open_warehouse

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"  # 3 profiler steps
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"  # 1 profiler step
CPU_ONLY = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HEADLINE_GATES = ("total_time_ms", "busy_time_ms", "kernel_time_ms")


def scaled_trace(source: Path, target: Path, factor: float) -> Path:
    """A copy of `source` whose GPU events last `factor` times longer (start times kept)."""
    with gzip.open(source, "rt") as handle:
        trace = json.load(handle)
    for event in trace["traceEvents"]:
        if isinstance(event, dict) and event.get("cat") in GPU_CATEGORIES and "dur" in event:
            event["dur"] = event["dur"] * factor
    with gzip.open(target, "wt", compresslevel=1) as handle:
        json.dump(trace, handle)
    return target


@dataclass(frozen=True)
class CompareWarehouse:
    folder: Path
    resnet_slow: Path  # 1.4x
    resnet_jitter: Path  # 1.01x
    bert_slow: Path  # 1.4x
    bert_jitter: Path  # 1.01x

    def compare(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("compare", *args, "--warehouse", str(self.folder))

    def compare_json(self, *args: str) -> tuple[int, dict]:
        """The exit code and the verdict of the one workload pair the sides make."""
        result = self.compare(*args, "--format", "json")
        assert result.returncode in (0, 1), result.stderr
        comparison = json.loads(result.stdout)
        assert len(comparison["pairs"]) == 1 and not comparison["unpaired_baseline"] + comparison["unpaired_candidate"]
        assert comparison["verdict"] == comparison["pairs"][0]["verdict"]["verdict"]
        return result.returncode, comparison["pairs"][0]["verdict"]


def _ingest(folder: Path, *args: str) -> None:
    result = run_cli("ingest", *args, "--warehouse", str(folder), "--jobs", "1", "--quiet")
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def cwh(tmp_path_factory: pytest.TempPathFactory) -> CompareWarehouse:
    """One warehouse for the module: the originals, then tagged runs (fast path after the first)."""
    root = tmp_path_factory.mktemp("compare")
    folder = root / "warehouse"
    made = CompareWarehouse(
        folder=folder,
        resnet_slow=scaled_trace(RESNET, root / "resnet_slow.json.gz", 1.4),
        resnet_jitter=scaled_trace(RESNET, root / "resnet_jitter.json.gz", 1.01),
        bert_slow=scaled_trace(BERT, root / "bert_slow.json.gz", 1.4),
        bert_jitter=scaled_trace(BERT, root / "bert_jitter.json.gz", 1.01),
    )
    _ingest(folder, str(RESNET), str(BERT))
    # run r1: two traces of "model x" (pooled as repeated samples); run r2: one slower trace
    _ingest(folder, str(made.resnet_jitter), str(scaled_trace(RESNET, root / "resnet_r1b.json.gz", 0.99)),
            "--tag", "model=x", "--tag", "run=r1")
    _ingest(folder, str(made.resnet_slow), "--tag", "model=x", "--tag", "run=r2")
    return made


def _trace_id(cwh: CompareWarehouse, path: Path) -> str:
    result = run_cli("sql", f"select trace_id from traces where file_name = '{path.name}'", "--format", "json",
                     "--warehouse", str(cwh.folder))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 1, rows
    return rows[0]["trace_id"]


def _headline(verdict: dict, name: str) -> dict:
    return next(m for m in verdict["headline"] if m["name"] == name)


def _assert_one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracelake: "), lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    return lines[0]


# ---- verdicts ------------------------------------------------------------------------------------

def test_trace_against_itself_is_no_change(cwh: CompareWarehouse) -> None:
    resnet_id = _trace_id(cwh, RESNET)
    result = cwh.compare(str(RESNET), resnet_id[:8])  # a path and a trace id prefix name the same trace
    assert result.returncode == 0, result.stderr
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith("NO CHANGE: total GPU time +0.0 %"), first_line
    assert "3 vs 3 steps" in first_line and "high confidence" in first_line
    for section in ("## Headline metrics", "## Categories", "## Top op signatures by absolute change",
                    "## New and gone op signatures"):
        assert section in result.stdout

    code, verdict = cwh.compare_json(resnet_id, resnet_id)
    assert code == 0
    assert verdict["verdict"] == "no_change" and verdict["regression"] is False
    assert verdict["failures"] == []
    assert verdict["baseline"]["trace_ids"] == verdict["candidate"]["trace_ids"] == [resnet_id]
    changes = [m["change_percent"] for m in verdict["headline"] + verdict["categories"] + verdict["ops"]]
    assert changes and all(c == 0 for c in changes)
    assert {m["status"] for m in verdict["ops"]} == {"unchanged"}


def test_slower_candidate_is_a_noise_aware_regression(cwh: CompareWarehouse) -> None:
    result = cwh.compare(str(RESNET), str(cwh.resnet_slow))
    assert result.returncode == 1, result.stderr
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith("REGRESSION: candidate is 40.0 % slower in GPU kernel time"), first_line
    assert "3 vs 3 steps" in first_line and "high confidence" in first_line

    code, verdict = cwh.compare_json(str(RESNET), str(cwh.resnet_slow))
    assert code == 1 and verdict["verdict"] == "regression" and verdict["regression"] is True
    for side in ("baseline", "candidate"):
        assert verdict[side]["sample_source"] == "profiler_steps"
        assert verdict[side]["sample_count"] == 3
        assert verdict[side]["kernel_time_std_ms"] > 0
    noise = verdict["noise"]
    assert noise["estimated"] is True and noise["borrowed_spread"] is False
    # the resnet steps differ by about 1 %: a band of 3 standard errors is a few percent
    assert 0.5 < noise["band_percent"] < 10
    assert noise["welch_df"] == pytest.approx(4.0, abs=0.1)
    kernel_time = _headline(verdict, "kernel_time_ms")
    assert kernel_time["change_percent"] == pytest.approx(40.0, abs=0.01)
    assert kernel_time["fails"] is True
    assert "GPU kernel time" in verdict["failures"]
    assert verdict["confidence"] == "high"
    # every GPU event is 40 % longer: so is the collectives category (it sums kernel durations)
    collectives = next(c for c in verdict["categories"] if c["name"] == "collectives")
    assert collectives["change_percent"] == pytest.approx(40.0, abs=0.01) and collectives["fails"]
    # tiny items are listed but cannot fail the run
    tiny = [m for m in verdict["categories"] + verdict["ops"] if not m["gating"]]
    assert tiny and not any(m["fails"] for m in tiny)
    assert any(m["status"] == "slower" for m in tiny)


def test_jittered_candidate_passes_the_default_threshold(cwh: CompareWarehouse) -> None:
    code, verdict = cwh.compare_json(str(RESNET), str(cwh.resnet_jitter))
    assert code == 0, verdict["summary"]
    assert verdict["verdict"] == "no_change"
    assert _headline(verdict, "kernel_time_ms")["change_percent"] == pytest.approx(1.0, abs=0.01)
    assert verdict["failures"] == []


def test_threshold_changes_the_outcome(cwh: CompareWarehouse) -> None:
    loose = cwh.compare(str(RESNET), str(cwh.resnet_slow), "--threshold-pct", "50")
    assert loose.returncode == 0, loose.stdout
    assert loose.stdout.startswith("NO CHANGE:") and "50 % threshold" in loose.stdout.splitlines()[0]
    # a 0.5 % threshold does not fail a 1 % change: it lies inside the steps' noise band
    code, verdict = cwh.compare_json(str(RESNET), str(cwh.resnet_jitter), "--threshold-pct", "0.5")
    assert code == 0, verdict["summary"]
    assert verdict["settings"]["threshold_percent"] == 0.5
    assert _headline(verdict, "kernel_time_ms")["status"] == "within_noise"


def test_single_step_traces_rest_on_the_threshold(cwh: CompareWarehouse) -> None:
    code, verdict = cwh.compare_json(str(BERT), str(cwh.bert_slow))
    assert code == 1
    assert verdict["noise"]["estimated"] is False and verdict["noise"]["band_percent"] is None
    assert verdict["baseline"]["sample_count"] == verdict["candidate"]["sample_count"] == 1
    assert verdict["confidence"] == "low"
    assert "noise not estimated" in verdict["summary"]
    code, verdict = cwh.compare_json(str(BERT), str(cwh.bert_jitter))
    assert code == 0, verdict["summary"]


def test_json_output_fields(cwh: CompareWarehouse) -> None:
    code, verdict = cwh.compare_json(str(RESNET), str(cwh.resnet_slow))
    assert code == 1
    assert set(verdict) >= {
        "verdict", "regression", "summary", "confidence", "deciding_metric", "settings", "baseline",
        "candidate", "noise", "category_source", "headline", "categories", "ops", "failures",
    }
    assert set(verdict["settings"]) == {"threshold_percent", "min_item_share_percent", "noise_standard_errors",
                                        "min_samples_high_confidence", "min_signature_overlap_percent"}
    assert verdict["signature_overlap_percent"] == pytest.approx(100.0)  # a slowed copy runs the same op signatures
    assert [m["name"] for m in verdict["headline"]][:3] == list(HEADLINE_GATES)
    assert all(m["gating"] for m in verdict["headline"] if m["name"] in HEADLINE_GATES)
    assert not any(m["gating"] for m in verdict["headline"] if m["name"] not in HEADLINE_GATES)
    op = verdict["ops"][0]
    assert {"name", "op_category", "input_dims", "input_type", "input_strides", "concrete_inputs",
            "baseline_calls", "candidate_calls", "baseline_ms", "candidate_ms", "delta_ms", "change_percent",
            "baseline_share_percent", "status", "gating", "fails"} <= set(op)
    deltas = [abs(o["delta_ms"]) for o in verdict["ops"]]
    assert deltas == sorted(deltas, reverse=True)
    # one row per signature: op_perf's per-platform rows are not multiplied in
    keys = [(o["name"], o["input_dims"], o["input_type"], o["input_strides"], o["concrete_inputs"]) for o in verdict["ops"]]
    assert len(keys) == len(set(keys))
    assert sum(o["baseline_ms"] or 0 for o in verdict["ops"]) < _headline(verdict, "kernel_time_ms")["baseline_ms"]


def test_tag_selectors_pool_matching_traces(cwh: CompareWarehouse) -> None:
    r1 = sorted([_trace_id(cwh, cwh.resnet_jitter), _trace_id(cwh, cwh.resnet_jitter.with_name("resnet_r1b.json.gz"))])
    code, verdict = cwh.compare_json("model=x,run=r1", "model=X,run=r2")
    assert code == 1, verdict["summary"]
    assert sorted(verdict["baseline"]["trace_ids"]) == r1
    assert verdict["candidate"]["trace_ids"] == [_trace_id(cwh, cwh.resnet_slow)]
    assert verdict["baseline"]["sample_source"] == "profiler_steps"
    assert verdict["baseline"]["sample_count"] == 6  # 3 steps from each of the 2 traces
    # the pooled baseline is the mean of a 1.01x and a 0.99x copy: the original's kernel time
    _, original = cwh.compare_json(str(RESNET), str(RESNET))
    pooled = _headline(verdict, "kernel_time_ms")["baseline_ms"]
    assert pooled == pytest.approx(_headline(original, "kernel_time_ms")["baseline_ms"], rel=1e-9)
    # the spread between the two pooled traces widens the noise band beyond a single trace's
    assert verdict["noise"]["baseline_cv_percent"] > original["noise"]["baseline_cv_percent"]
    md = cwh.compare("model=x,run=r1", str(RESNET))
    assert md.returncode == 0, md.stdout
    assert all(trace_id in md.stdout for trace_id in r1)


# ---- bad input -----------------------------------------------------------------------------------

def test_bad_input_is_one_line_and_exit_2(cwh: CompareWarehouse, tmp_path: Path) -> None:
    resnet_id = _trace_id(cwh, RESNET)
    cases = {
        "missing file": ((str(tmp_path / "missing.json.gz"), resnet_id), "no such file"),
        "unknown trace id": ((resnet_id, "0123456789abcdef"), "no trace 0123456789abcdef"),
        "selector matching nothing": (("model=nobody", resnet_id), "matches no trace"),
        "malformed selector": (("model=x,run", resnet_id), "is not KEY=VALUE"),
        "not a selector": (("yesterday", resnet_id), "is not a trace file, a trace id"),
        "negative threshold": ((resnet_id, resnet_id, "--threshold-pct", "-3"), "--threshold-pct"),
        "no GPU work": ((str(CPU_ONLY), resnet_id), "has no GPU work"),
    }
    for name, (args, expected) in cases.items():
        line = _assert_one_clean_line(cwh.compare(*args))
        assert expected in line, (name, line)


def test_missing_warehouse_is_exit_2(tmp_path: Path) -> None:
    result = run_cli("compare", "0123456789abcdef", "0123456789abcdef", "--warehouse", str(tmp_path / "none"))
    assert "no warehouse" in _assert_one_clean_line(result)


def _damaged_copy(cwh: CompareWarehouse, tmp_path: Path, statement: str) -> Path:
    folder = tmp_path / "wh"
    shutil.copytree(cwh.folder, folder)
    copy = open_warehouse(folder)
    copy.repair()  # a copied lakehouse's catalog re-pointed at the copy's own data files first
    with (copy.connect_lake(read_only=False) if isinstance(copy, LakeWarehouse)
          else duckdb.connect(str(copy.db_path))) as con:
        con.execute(statement)
    return folder


def test_warehouse_from_an_older_version_asks_for_a_build(cwh: CompareWarehouse, tmp_path: Path) -> None:
    resnet_id = _trace_id(cwh, RESNET)
    folder = _damaged_copy(cwh, tmp_path, "drop table profiler_steps")
    line = _assert_one_clean_line(run_cli("compare", resnet_id, resnet_id, "--warehouse", str(folder)))
    assert "profiler_steps" in line and "tracelake build" in line


def test_an_internal_error_is_not_a_regression_verdict(cwh: CompareWarehouse, tmp_path: Path) -> None:
    """Exit 1 means "regression" to CI; a crash exits 3 with one line."""
    resnet_id = _trace_id(cwh, RESNET)
    folder = _damaged_copy(cwh, tmp_path, "drop table gpu_timeline; create table gpu_timeline as select 1 as x")
    result = run_cli("compare", resnet_id, resnet_id, "--warehouse", str(folder))
    assert result.returncode == 3, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tracelake: internal error:") and "Traceback" not in result.stderr
