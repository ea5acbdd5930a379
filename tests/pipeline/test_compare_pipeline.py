"""`tracelake analyze TRACE --compare TRACE2` on the shared H100 / MI300X pairs (bert-small, Qwen 1.5)."""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path

import pytest

from tests.conftest import EXPECTED, TRACES, run_cli
from tests.pipeline.conftest import copy_of
from tracelake.analyzers.contracts import AgentResult, PriorityData
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.reports.analysis_md import validate_analysis
from tracelake.warehouse import Warehouse

PAIRS = {
    "bert": ("h100/gaunernst_bert-small-uncased__1016001.json.gz", "mi300/gaunernst_bert-small-uncased__1016001.json.gz"),
    "qwen": ("h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
}
TIMELINE_KEYS = ("total_time", "computation_time", "exposed_comm_time", "exposed_memcpy_time", "idle_time")


@pytest.fixture(scope="module")
def compare_warehouse(warehouse, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return copy_of(warehouse, tmp_path_factory, "compare")


@pytest.fixture(scope="module")
def comparisons(compare_warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out_root = tmp_path_factory.mktemp("compare_reports")
    outs = {}
    for name, (first, second) in PAIRS.items():
        out = out_root / name
        run_analysis(TRACES / first, compare_warehouse, AnalyzeOptions(out_dir=out, jobs=1, compare=TRACES / second))
        outs[name] = out
    return outs


def _reference_timeline(relative: str) -> dict[str, tuple[float, float]]:
    folder = relative.removesuffix(".json.gz").replace("/", "__")
    with (EXPECTED / folder / "gpu_timeline.csv").open() as handle:
        return {row["type"]: (float(row["time ms"]), float(row["percent"])) for row in csv.DictReader(handle)}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_manifest_totals_equal_each_traces_reference_timeline(comparisons, pair: str) -> None:
    manifest = json.loads((comparisons[pair] / "category_data" / "category_manifest.json").read_text())
    assert manifest["comparison_scope"] == "comparative"
    for key, relative in (("gpu_utilization", PAIRS[pair][0]), ("trace2_gpu_utilization", PAIRS[pair][1])):
        reference = _reference_timeline(relative)
        for name in TIMELINE_KEYS:
            ms, percent = reference[name]
            assert manifest[key][f"{name}_ms"] == pytest.approx(ms, rel=1e-6, abs=1e-6), (key, name)
            if name != "total_time":
                assert manifest[key][f"{name}_percent"] == pytest.approx(percent, rel=1e-6, abs=1e-6), (key, name)
    categories2 = manifest["trace2_ops_summary_by_category"]
    assert categories2 and {"op category", "Count", "total_direct_kernel_time_ms", "Percentage (%)",
                            "Cumulative Percentage (%)"} <= set(categories2[0])
    assert categories2[-1]["Cumulative Percentage (%)"] == pytest.approx(100.0)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_comparative_report_is_valid_with_both_traces(comparisons, pair: str) -> None:
    out = comparisons[pair]
    for expected in ["analysis.md", "priority_data.json", "perf_improvement.png", "metadata/trace2_quality.json",
                     "perf_report_trace1_csvs/gpu_timeline.csv", "perf_report_trace2_csvs/gpu_timeline.csv",
                     "perf_report_trace1_csvs/op_comparison.csv", "category_data/op_comparison.json"]:
        assert (out / expected).is_file(), expected
    assert not (out / "perf_report_csvs").exists()
    markdown = (out / "analysis.md").read_text()
    priority = PriorityData.model_validate_json((out / "priority_data.json").read_text())
    assert priority.comparison_scope == "comparative"
    assert validate_analysis(markdown, priority) == []
    assert markdown.splitlines()[0].endswith("- Comparative Analysis: H100 vs MI300X")
    # the metric table: both totals and their difference, from each trace's reference timeline
    t1 = _reference_timeline(PAIRS[pair][0])["total_time"][0]
    t2 = _reference_timeline(PAIRS[pair][1])["total_time"][0]
    row = next(line for line in markdown.splitlines() if line.startswith("| Total Time |"))
    assert f"{t1:.3f} ms" in row and f"{t2:.3f} ms" in row and f"{t2 - t1:+.3f} ms" in row
    # the Top Operations table shows both traces' times for matched ops
    top = markdown.split("### Top Operations", 1)[1].split("\n\n", 2)[1]
    assert "| Trace 1 Time (ms) | Trace 2 Time (ms) |" in top
    rows = [line for line in top.splitlines()[2:] if line.startswith("| ")]
    assert len(rows) == 10
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert re.fullmatch(r"\d+\.\d{3}", cells[4]) and re.fullmatch(r"\d+\.\d{3}", cells[5]), line
    assert "System-level analysis is on trace 1 only" in markdown


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("agent", ["gemm", "elementwise"])
def test_gemm_and_elementwise_ops_are_matched_with_an_efficiency(comparisons, pair: str, agent: str) -> None:
    result = AgentResult.model_validate_json((comparisons[pair] / "category_data" / f"{agent}_metrics.json").read_text())
    assert result.status == "OK"
    ops = result.metrics["operations"]
    matched = [op for op in ops if op["comparison"] is not None]
    assert matched and len(matched) == len(ops)  # the pairs run the same model: every op has its match
    for op in matched:
        t1, t2 = op["time_ms"], op["comparison"]["time_trace2_ms"]
        assert t1 > 0 and t2 > 0
        measured = 100.0 * t2 / t1
        # efficiency = 100 t2 / t1, raised to trace 1's roofline value when that is higher
        assert op["efficiency_percent"] == pytest.approx(max(measured, op["roofline_percent"] or 0.0), rel=1e-6)
        assert op["efficiency_capped"] == (op["roofline_percent"] is not None and measured < op["roofline_percent"])


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_compute_findings_are_measured_gaps_on_the_slower_side(comparisons, pair: str) -> None:
    """A card ranks the gap of the slower trace: trace 1's (efficiency = 100 t2 / t1 < 100) as
    TraceLens does, and trace 2's too (issue 28: bert's attention takes 3.04x as long on MI300X and
    had no card); trace 2's gap is t2 - t1 on the report's E2E and claims none of trace 1's GPU time."""
    priority = PriorityData.model_validate_json((comparisons[pair] / "priority_data.json").read_text())
    compute = [f for f in priority.findings if f.tier == "compute"]
    e2e = priority.e2e_time_ms
    sides = set()
    for finding in compute:
        members = finding.evidence["members"]
        assert finding.estimate_method == "quantified"
        trace2_slower = "trace 2 takes" in finding.title
        sides.add(2 if trace2_slower else 1)
        if trace2_slower:
            assert all(m["efficiency_percent"] > 100.0 for m in members)
            assert finding.claimed_time_ms is None
            # impact high = sum over members of (t2 - t1) / E2E x 100
            expected_high = sum((m["efficiency_percent"] / 100 - 1) * m["time_ms"] / e2e * 100 for m in members)
        else:
            assert all(m["efficiency_percent"] < 100.0 for m in members)
            # impact high = sum over members of (1 - eff/100) x t1 / E2E x 100
            expected_high = sum((1 - m["efficiency_percent"] / 100) * m["time_ms"] / e2e * 100 for m in members)
        assert finding.impact_high == pytest.approx(expected_high, rel=1e-6)
    assert [f.global_rank for f in priority.findings] == list(range(1, len(priority.findings) + 1))
    if pair == "bert":  # SDPA: 0.037 ms on H100, 0.114 ms on MI300X
        attention = next(f for f in compute if f.title.startswith("aten::_scaled_dot_product_flash_attention"))
        assert "trace 2 takes 3.04x the time of trace 1" in attention.title
        assert attention.recoverable_ms == pytest.approx(0.875 * 0.0762, rel=0.01)
        assert sides == {1, 2}
    markdown = (comparisons[pair] / "analysis.md").read_text()
    assert "Efficiency (100·t2/t1)" not in markdown and "| Slower side (time ratio) |" in markdown
    # the advice reads a group's % of roofline (trace 1's), never the comparative 100 x t2 / t1
    assert all(float(v) <= 100.0 for v in re.findall(r"averages ([\d.]+) %", markdown))
    if pair == "bert":  # the standalone H100 report's figure for the same attention group
        assert "this group averages 1.8 % (below that band)" in markdown


def test_op_comparison_covers_every_op_of_both_traces(comparisons, compare_warehouse: Warehouse) -> None:
    comparison = json.loads((comparisons["qwen"] / "category_data" / "op_comparison.json").read_text())
    _assert_every_op_counted_once(comparison)
    with compare_warehouse.connect_read_only() as con:
        recorded = con.execute("select comparison_scope, trace2_id from analyses where trace2_id = ?",
                               [comparison["trace2_id"]]).fetchall()
        findings = con.execute("select count(*) from findings where trace2_id = ?", [comparison["trace2_id"]]).fetchone()
    assert recorded == [("comparative", comparison["trace2_id"])]
    priority = PriorityData.model_validate_json((comparisons["qwen"] / "priority_data.json").read_text())
    assert findings == (len(priority.findings),)


def _renamed_copy(source: Path, target: Path, old: str, new: str) -> None:
    """`old` renamed to `new`, with one more (scalar) argument, as a vendor's own op would have."""
    data = json.loads(gzip.decompress(source.read_bytes()))
    for event in data["traceEvents"]:
        if event.get("name") == old:
            event["name"] = new
            args = event.get("args", {})
            if "Input Dims" in args:
                args["Input Dims"] = [*args["Input Dims"], []]
                args["Input type"] = [*args["Input type"], "Scalar"]
    target.write_bytes(gzip.compress(json.dumps(data).encode()))


def _assert_every_op_counted_once(comparison: dict) -> None:
    assert comparison["matched_time_trace1_ms"] + sum(o["time_ms"] for o in comparison["only_in_trace1"]) == \
        pytest.approx(comparison["time_trace1_ms"], rel=1e-9)
    assert comparison["matched_time_trace2_ms"] + sum(o["time_ms"] for o in comparison["only_in_trace2"]) == \
        pytest.approx(comparison["time_trace2_ms"], rel=1e-9)


def test_ops_named_differently_are_matched_by_model_layer(compare_warehouse: Warehouse, tmp_path: Path) -> None:
    first, second = PAIRS["bert"]
    renamed = tmp_path / "bert_renamed_gelu.json.gz"
    _renamed_copy(TRACES / second, renamed, "aten::gelu", "vendor::fast_gelu")
    out = tmp_path / "out"
    run_analysis(TRACES / first, compare_warehouse, AnalyzeOptions(out_dir=out, jobs=1, compare=renamed))
    comparison = json.loads((out / "category_data" / "op_comparison.json").read_text())
    by_layer = [m for m in comparison["matched"] if m["matched_by"] == "module_path"]
    # gelu runs in two layers (encoder MLP, LM head) with one shape each: two matches, each in its layer
    assert sorted((m["name"], m["name_trace2"], m["input_dims"]) for m in by_layer) == [
        ("aten::gelu", "vendor::fast_gelu", "[[1,141,2048],[]]"), ("aten::gelu", "vendor::fast_gelu", "[[1,141,512],[]]")]
    assert all(m["count_trace1"] == m["count_trace2"] and m["module_path"].endswith("GELUActivation") for m in by_layer)
    assert comparison["only_in_trace1"] == [] and comparison["only_in_trace2"] == []
    _assert_every_op_counted_once(comparison)


def test_ops_without_a_cpu_op_are_matched_too(compare_warehouse: Warehouse, tmp_path: Path) -> None:
    """The B200 trace has synthetic ops (kernels no cpu op launched; no input shapes)."""
    trace = TRACES / "b200" / "eager_trace.json.gz"
    run_analysis(trace, compare_warehouse, AnalyzeOptions(out_dir=tmp_path / "out", jobs=1, compare=trace))
    comparison = json.loads((tmp_path / "out" / "category_data" / "op_comparison.json").read_text())
    synthetic = [m for m in comparison["matched"] if m["name"].endswith("(Synthetic Op)")]
    assert synthetic and all(m["efficiency_percent"] == pytest.approx(100.0) for m in comparison["matched"])
    assert comparison["only_in_trace1"] == [] and comparison["only_in_trace2"] == []
    _assert_every_op_counted_once(comparison)


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_comparative_evidence_sql_reproduces_each_finding(comparisons, compare_warehouse: Warehouse,
                                                          pair: str) -> None:
    priority = PriorityData.model_validate_json((comparisons[pair] / "priority_data.json").read_text())
    compute = [f for f in priority.findings if f.tier == "compute"]
    # a measured comparative gap whose GPU time a fusion finding owns is folded into it (claims ledger)
    folded = [f for f in priority.findings if "**Overlap:**" in f.details and "trace 1 takes" in f.details]
    assert compute or folded
    with compare_warehouse.connect_read_only() as con:
        for finding in compute:
            # the agent's own query over the marts (evidence_sql is the claims ledger's; a card of trace 2's
            # gap claims none of trace 1's GPU time, so its evidence_sql stays the agent's)
            rows = con.execute(finding.analysis_sql or finding.evidence_sql).fetchall()
            members = finding.evidence["members"]
            assert len(rows) == len(members), finding.title
            assert sorted(r[3] for r in rows) == pytest.approx(sorted(m["time_ms"] for m in members))


def test_compare_cli_bad_inputs(compare_warehouse: Warehouse, tmp_path: Path) -> None:
    first, _ = PAIRS["bert"]
    missing = run_cli("analyze", str(TRACES / first), "--compare", str(tmp_path / "nope.json.gz"),
                      "--warehouse", str(compare_warehouse.root), "--out", str(tmp_path / "o1"))
    assert missing.returncode == 2 and "nope.json.gz" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o1").exists()
    orphan = run_cli("analyze", str(TRACES / first), "--platform2", "H100",
                     "--warehouse", str(compare_warehouse.root), "--out", str(tmp_path / "o2"))
    assert orphan.returncode == 2 and "--compare" in orphan.stderr
    cpu_only = run_cli("analyze", str(TRACES / first), "--compare", str(TRACES / "cpu_only" / "cpu_mlp_training.json.gz"),
                       "--warehouse", str(compare_warehouse.root), "--out", str(tmp_path / "o3"))
    assert cpu_only.returncode == 2 and "no GPU events" in cpu_only.stderr
    assert len(cpu_only.stderr.strip().splitlines()) == 1 and not (tmp_path / "o3").exists()
