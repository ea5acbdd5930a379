"""`tracelake analyze` end to end: output layout, analysis.md, findings, agents, quality gate."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import EXPECTED, TRACES, run_cli
from tests.pipeline.conftest import copy_of
from tests.reports.markdown_checks import card_ranks, leaks, long_names
from tracelake.analyzers import settings
from tracelake.analyzers.contracts import PriorityData
from tracelake.core.kernel_names import KERNEL_NAME_MAX_CHARS
from tracelake.folders import OutputFolderError
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.reports.analysis_cards import finding_kind
from tracelake.reports.analysis_md import NAME_MAX_CHARS, validate_analysis
from tracelake.warehouse import Warehouse

SECTIONS = ["## Executive Summary", "## Compute Kernel Optimizations", "## Kernel Fusion Opportunities (Experimental)",
            "## System-Level Optimizations", "## Detailed Analysis", "## Appendix"]
ALL_TRACES = sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz"))
REFERENCE_TIMELINES = {
    "h100/gaunernst_bert-small-uncased__1016001.json.gz": "h100__gaunernst_bert-small-uncased__1016001",
    "mi300/resnet_act_checkpoint.json.gz": "mi300__resnet_act_checkpoint",
    "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": "h100__Qwen_Qwen1.5-0.5B-Chat__1016005",
}


@pytest.fixture(scope="module")
def analysis_warehouse(warehouse, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return copy_of(warehouse, tmp_path_factory, "analysis")


@pytest.fixture(scope="module")
def analyses(analysis_warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every test trace analyzed once (standalone, MI300X roofline as the references)."""
    out_root = tmp_path_factory.mktemp("reports")
    outs = {}
    for relative in ALL_TRACES:
        out = out_root / relative.replace("/", "__")
        run_analysis(TRACES / relative, analysis_warehouse, AnalyzeOptions(platform="MI300X", out_dir=out, jobs=1))
        outs[relative] = out
    return outs


def _priority(out: Path) -> PriorityData:
    return PriorityData.model_validate_json((out / "priority_data.json").read_text())


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_report_is_complete_and_valid(analyses, relative: str) -> None:
    out = analyses[relative]
    for expected in ["analysis.md", "priority_data.json", "perf_improvement.png", "metadata/run.json",
                     "metadata/trace_quality.json", "metadata/validation.json", "metadata/model_info.json",
                     "category_data/category_manifest.json"]:
        assert (out / expected).is_file(), expected
    markdown = (out / "analysis.md").read_text()
    priority = _priority(out)
    assert validate_analysis(markdown, priority) == []
    positions = [markdown.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert markdown.startswith("# ") and " - MI300X Standalone Analysis" in markdown.splitlines()[0]
    ranks = [f.global_rank for f in priority.findings]
    assert ranks == list(range(1, len(ranks) + 1))
    scored = [f for f in priority.findings if f.impact_score is not None]
    enablers = {f.realisable_after for f in priority.findings if f.realisable_after}
    for i, earlier in enumerate(scored):
        for later in scored[i + 1:]:
            # by impact, but for the two rules of the order: a heuristic guess never ranks above a
            # quantified finding of more GPU time, and a finding another waits for ranks above it
            assert (earlier.impact_score or 0.0) >= (later.impact_score or 0.0) or earlier.finding_id in enablers or (
                earlier.estimate_method == "quantified" and later.estimate_method == "heuristic"
                and (earlier.claimed_time_ms or 0.0) > (later.claimed_time_ms or 0.0)), (earlier.title, later.title)


@pytest.mark.parametrize("relative", sorted(REFERENCE_TIMELINES))
def test_manifest_and_metric_table_match_the_reference_timeline(analyses, relative: str) -> None:
    out = analyses[relative]
    with (EXPECTED / REFERENCE_TIMELINES[relative] / "gpu_timeline.csv").open() as handle:
        reference = {row["type"]: float(row["time ms"]) for row in csv.DictReader(handle)}
    manifest = json.loads((out / "category_data" / "category_manifest.json").read_text())
    assert manifest["gpu_utilization"]["total_time_ms"] == pytest.approx(reference["total_time"], rel=1e-6)
    assert manifest["gpu_utilization"]["idle_time_ms"] == pytest.approx(reference["idle_time"], rel=1e-6)
    summary = (out / "analysis.md").read_text().split("## Executive Summary", 1)[1].split("##", 1)[0]
    assert f"{reference['total_time']:.3f}" in summary or f"{reference['total_time']:.2f}" in summary


def test_bert_h100_is_launch_bound_first(analyses) -> None:
    top = _priority(analyses["h100/gaunernst_bert-small-uncased__1016001.json.gz"]).findings[0]
    assert top.agent == "cpu_idle" and top.tier == "system"


def test_resnet_gets_a_communication_overlap_finding(analyses) -> None:
    findings = _priority(analyses["mi300/resnet_act_checkpoint.json.gz"]).findings
    overlap = [f for f in findings if f.agent == "multi_kernel"]
    assert overlap and overlap[0].global_rank <= 3


def test_modelled_ops_are_ranked_by_recoverable_time(analyses) -> None:
    findings = _priority(analyses["h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"]).findings
    quantified = [f for f in findings if f.estimate_method == "quantified"]
    assert quantified
    assert [f.recoverable_ms for f in quantified] == sorted((f.recoverable_ms for f in quantified), reverse=True)


def test_agents_of_a_tier_run_in_parallel(analyses) -> None:
    run = json.loads((analyses["mi300/resnet_act_checkpoint.json.gz"] / "metadata" / "run.json").read_text())
    compute = [a for a in run["agents"] if a["tier"] == "compute"]
    assert len(compute) >= 2
    latest_start = max(a["started_at"] for a in compute)
    earliest_finish = min(a["finished_at"] for a in compute)
    assert latest_start < earliest_finish  # every compute agent had started before the first finished
    steps = {s["step"]: s for s in run["steps"]}
    assert run["steps"][0]["step"] == "ingest"
    # the system tier runs beside the perf report; the compute tier only after it (fusion first)
    assert steps["system agents"]["started_at"] < steps["perf report"]["finished_at"]
    assert steps["perf report"]["started_at"] < steps["system agents"]["finished_at"]
    system = [a for a in run["agents"] if a["tier"] == "system"]
    assert max(a["finished_at"] for a in system) <= min(a["started_at"] for a in compute)


def test_findings_table_holds_the_ranked_findings(analyses, analysis_warehouse: Warehouse) -> None:
    out = analyses["mi300/resnet_act_checkpoint.json.gz"]
    priority = _priority(out)
    with analysis_warehouse.connect_read_only() as con:
        rows = con.execute("select global_rank, finding_id, evidence_sql from findings where trace_id = ? order by global_rank",
                           [priority.trace_id]).fetchall()
        assert [(r[0], r[1]) for r in rows] == [(f.global_rank, f.finding_id) for f in priority.findings]
        for _, _, sql in rows:
            assert con.execute(sql).fetchall()
        recorded = con.execute("select comparison_scope, analysis_md, finding_count from analyses where trace_id = ?",
                               [priority.trace_id]).fetchall()
    assert recorded == [("standalone", str(out.resolve() / "analysis.md"), len(priority.findings))]
    assert (out / "analysis.md").is_file()


def test_gpu_only_trace_says_what_was_skipped(analyses) -> None:
    markdown = (analyses["mi210/gpu_only_trace/gpu_only_trace.json.gz"] / "analysis.md").read_text()
    head = markdown.split("## Compute Kernel Optimizations", 1)[0]
    assert "## Warnings" in head and "no CPU ops" in head


def test_graph_replay_without_capture_says_so(analyses) -> None:
    markdown = (analyses["inference/vllm_decode_full/graph_execution.json.gz"] / "analysis.md").read_text()
    assert "capture" in markdown.split("## Compute Kernel Optimizations", 1)[0]
    run = json.loads((analyses["inference/vllm_decode_full/graph_execution.json.gz"] / "metadata" / "run.json").read_text())
    assert run["mode"] == "inference-graph" and "graph launches" in run["mode_reason"]


def test_cpu_only_trace_gets_a_cpu_report(analyses) -> None:
    out = analyses["cpu_only/cpu_mlp_training.json.gz"]
    markdown = (out / "analysis.md").read_text()
    assert "no GPU events" in markdown and "aten::linear" in markdown


def test_forced_agent_failure_shows_in_warnings(analysis_warehouse: Warehouse, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELAKE_FORCE_AGENT_FAILURE", "gemm")
    out = tmp_path / "out"
    outcome = run_analysis(TRACES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", analysis_warehouse,
                           AnalyzeOptions(platform="MI300X", out_dir=out))
    markdown = (out / "analysis.md").read_text()
    warnings = markdown.split("## Warnings", 1)[1].split("## Compute Kernel Optimizations", 1)[0]
    assert "gemm" in warnings
    assert outcome.report_problems == []
    gemm = json.loads((out / "category_data" / "gemm_metrics.json").read_text())
    assert gemm["status"] == "ERROR" and gemm["attempts"] == 2
    assert any(f.agent == "sdpa" or f.agent == "elementwise" for f in _priority(out).findings)


LLM_SCRIPT = '''
import json, re, sys
prompt = sys.stdin.read()
payload = json.loads(re.search(r"```json\\n(.*)\\n```", prompt, re.S).group(1))
print("# " + payload["agent"] + " (LLM)")
print("**Status**: SUCCESS")
for finding in payload["deterministic_findings"]:
    print("### " + finding["title"])
    print("**Insight**: " + finding["insight"])
'''


def test_llm_runner_uses_the_command_and_falls_back(analysis_warehouse: Warehouse, tmp_path: Path) -> None:
    script = tmp_path / "fake_llm.py"
    script.write_text(LLM_SCRIPT)
    out = tmp_path / "llm"
    run_analysis(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", analysis_warehouse,
                 AnalyzeOptions(platform="MI300X", out_dir=out, agents="llm", llm_cmd=f"{sys.executable} {script}"))
    assert "(LLM)" in (out / "system_findings" / "cpu_idle_findings.md").read_text()

    broken = tmp_path / "broken"
    outcome = run_analysis(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", analysis_warehouse,
                           AnalyzeOptions(platform="MI300X", out_dir=broken, agents="llm",
                                          llm_cmd=f"{sys.executable} -c 'import sys; sys.exit(3)'"))
    assert "(LLM)" not in (broken / "system_findings" / "cpu_idle_findings.md").read_text()
    assert any("deterministic findings are used" in w for w in outcome.warnings)


def test_rerun_replaces_the_report_and_never_a_users_file(analysis_warehouse: Warehouse, tmp_path: Path) -> None:
    out = tmp_path / "out"
    trace = TRACES / "torch_compile_triton" / "trace.json.gz"
    run_analysis(trace, analysis_warehouse, AnalyzeOptions(platform="MI300X", out_dir=out))
    (out / "analysis.md").write_text("from an older run")
    run_analysis(trace, analysis_warehouse, AnalyzeOptions(platform="MI300X", out_dir=out))
    assert (out / "analysis.md").read_text() != "from an older run"
    (out / "mine.txt").write_text("the user's")
    with pytest.raises(OutputFolderError, match="mine.txt"):
        run_analysis(trace, analysis_warehouse, AnalyzeOptions(platform="MI300X", out_dir=out))
    run_analysis(trace, analysis_warehouse, AnalyzeOptions(platform="MI300X", out_dir=out, force=True))
    assert (out / "mine.txt").read_text() == "the user's" and (out / "analysis.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_cli_analyze_end_to_end(analysis_warehouse: Warehouse, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(analysis_warehouse.root, folder)
    out = tmp_path / "cli"
    result = run_cli("analyze", str(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"),
                     "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert (out / "analysis.md").is_file() and "platform H100 (trace device)" in result.stdout
    bad = run_cli("analyze", str(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"),
                  "--warehouse", str(folder), "--agents", "llm")
    assert bad.returncode == 2 and "--llm-cmd" in bad.stderr


def test_out_folder_holding_the_warehouse_is_refused(tmp_path: Path) -> None:
    result = run_cli("analyze", str(TRACES / "torch_compile_triton" / "trace.json.gz"),
                     "--warehouse", str(tmp_path / "out" / "wh"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "it holds" in result.stderr and "outside it" in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("relative", "warns"), [
    ("inference/vllm_decode_full/graph_execution.json.gz", True),  # ROCm GPU work, no device name: MI300X
    ("cpu_only/cpu_mlp_training.json.gz", False),  # no GPU work: no roofline, nothing to warn about
])
def test_default_platform_warns_only_when_a_roofline_is_drawn(analysis_warehouse: Warehouse, tmp_path: Path,
                                                              relative: str, warns: bool) -> None:
    outcome = run_analysis(TRACES / relative, analysis_warehouse, AnalyzeOptions(out_dir=tmp_path / "out"))
    assert outcome.platform_source == "assumed"
    assert any("roofline assumed MI300X (the default for a ROCm trace), it names no device; pass --platform" in w
               for w in outcome.warnings) == warns
    markdown = (tmp_path / "out" / "analysis.md").read_text()
    assert ("> **Assumed roofline.** The trace names no device" in markdown) == warns
    # the title says the platform is assumed either way: a CPU-only trace ran on no known GPU either
    assert markdown.splitlines()[0].endswith(" - MI300X roofline, assumed (the trace names no device) Standalone Analysis")


def test_a_reused_output_folder_points_only_at_its_latest_report(analysis_warehouse: Warehouse,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "shared_out"
    first = run_analysis(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", analysis_warehouse,
                         AnalyzeOptions(platform="MI300X", out_dir=out))
    second = run_analysis(TRACES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", analysis_warehouse,
                          AnalyzeOptions(platform="MI300X", out_dir=out))
    with analysis_warehouse.connect_read_only() as con:
        rows = con.execute("select trace_id from analyses where analysis_md = ?",
                           [str(out.resolve() / "analysis.md")]).fetchall()
    assert rows == [(second.trace_id,)] and first.trace_id != second.trace_id
    assert "Qwen" in (out / "analysis.md").read_text().splitlines()[0]


# ---- the claims ledger: findings add up ---------------------------------------------------------

CARD = re.compile(r"^### P(\d+): .*?$(.*?)(?=^### |^## )", re.MULTILINE | re.DOTALL)
CLAIMS_LINE = re.compile(r"\*\*Claims\*\*: ([\d,]+\.\d{3}) ms of GPU time")
RANKED_ROW = re.compile(r"^\| P(\d+) \| (.*?) \| (\w+) \| (.+?) \| (high|medium|low) \|$", re.MULTILINE)


def _ledger(warehouse: Warehouse, trace_id: str) -> dict[str, list[tuple]]:
    with warehouse.connect_read_only() as con:
        return {
            "kernels": con.execute("select finding_id, event_idx, claimed_us from finding_kernels "
                                   "where trace_id = ? and trace2_id is null", [trace_id]).fetchall(),
            "gaps": con.execute("select finding_id, gap_id, claimed_us from finding_gaps "
                                "where trace_id = ? and trace2_id is null", [trace_id]).fetchall(),
        }


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_findings_add_up(analyses, analysis_warehouse: Warehouse, relative: str) -> None:
    """No GPU event nor idle gap counts in two findings of a report; every finding with an
    estimate rests on claims; its printed GPU time is the sum of its claimed rows; the high
    estimates together stay within the E2E time."""
    out = analyses[relative]
    priority = _priority(out)
    ledger = _ledger(analysis_warehouse, priority.trace_id)
    for kind in ("kernels", "gaps"):
        ids = [row[1] for row in ledger[kind]]
        assert len(ids) == len(set(ids)), f"a {kind[:-1]} is claimed twice"
    claimed: dict[str, float] = {}
    for finding_id, _, us in ledger["kernels"] + ledger["gaps"]:
        claimed[finding_id] = claimed.get(finding_id, 0.0) + us / 1000.0
    assert set(claimed) <= {f.finding_id for f in priority.findings}
    cards = {int(rank): body for rank, body in CARD.findall((out / "analysis.md").read_text())}
    for finding in priority.findings:
        if finding.impact_score is not None:
            assert finding.claimed_time_ms, f"{finding.finding_id} has an estimate but no claims"
        if finding.claimed_time_ms is None:
            assert finding.finding_id not in claimed
            continue
        assert claimed[finding.finding_id] == pytest.approx(finding.claimed_time_ms, abs=1e-6)
        printed = CLAIMS_LINE.search(cards[finding.global_rank])
        assert printed is not None, f"P{finding.global_rank} prints no claims"
        assert float(printed.group(1).replace(",", "")) == pytest.approx(finding.claimed_time_ms, abs=5e-4)
        assert (finding.impact_high or 0.0) * priority.e2e_time_ms / 100.0 <= finding.claimed_time_ms + 1e-9
    high_ms = sum((f.impact_high or 0.0) * priority.e2e_time_ms / 100.0 for f in priority.findings)
    assert high_ms <= priority.e2e_time_ms + 1e-9


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_evidence_sql_returns_the_printed_numbers(analyses, analysis_warehouse: Warehouse, relative: str) -> None:
    priority = _priority(analyses[relative])
    with analysis_warehouse.connect_read_only() as con:
        for finding in priority.findings:
            if finding.claimed_time_ms is None:
                continue
            events, gaps, claimed_ms, recoverable_ms, _, recoverable_percent = con.execute(finding.evidence_sql).fetchone()
            assert (events, gaps) == (finding.claimed_kernel_count, finding.claimed_gap_count)
            assert claimed_ms == pytest.approx(round(finding.claimed_time_ms, 3), abs=1e-9)
            if finding.recoverable_ms is not None:
                # DuckDB rounds an exact half away from zero, Python's round() the binary float below
                # it (a latency-bound credit of 210 x 1.75 us is 0.3675 ms): at most one printed unit apart
                assert recoverable_ms == pytest.approx(round(finding.recoverable_ms, 3), abs=1e-3 + 1e-9)
                # its share of the report's E2E is the ranked mid impact
                assert recoverable_percent == pytest.approx(100.0 * finding.recoverable_ms / priority.e2e_time_ms,
                                                            abs=2e-3)
            if finding.analysis_sql:
                con.execute(finding.analysis_sql).fetchall()  # the agent's own query still runs


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_priority_data_and_analysis_md_rank_the_same_findings(analyses, relative: str) -> None:
    out = analyses[relative]
    priority = _priority(out)
    markdown = (out / "analysis.md").read_text()
    table = markdown.split("**All findings, by recoverable time**", 1)
    rows = RANKED_ROW.findall(table[1].split("\n\n", 2)[1]) if len(table) == 2 else []
    assert [(int(r[0]), r[2], r[4]) for r in rows] == [(f.global_rank, f.category, f.confidence) for f in priority.findings]
    # the cards stand in their kind's section (compute, fusion, system), in rank order there
    kinds = ("compute", "fusion", "system")
    assert card_ranks(markdown) == [f.global_rank for f in sorted(priority.findings, key=lambda f: (
        kinds.index(finding_kind(f)), f.global_rank))]
    scored = [f for f in priority.findings if f.impact_score is not None]
    # priorities: every tier's categories, in the order of their best-ranked finding (P1's first)
    expected = list(dict.fromkeys(f.category for f in scored))[: settings.MAX_CATEGORY_PRIORITIES]
    listed = [p for p in priority.priorities if p.source == "findings"]
    assert [p.category for p in listed] == expected
    for category in listed:
        total = sum(f.impact_score for f in scored if f.category == category.category)
        assert category.impact_score == pytest.approx(total, abs=1e-4)


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_reports_read_without_placeholders_or_long_names(analyses, relative: str) -> None:
    """No missing fact printed as 'None', 'nan', 'unknown-bound' or an empty cell, no kernel name
    longer than the short-name cap before the appendix (the full names are in it), SQL only there."""
    out = analyses[relative]
    documents = {"analysis.md": (out / "analysis.md").read_text()}
    documents.update({p.name: p.read_text() for p in sorted(out.glob("*_findings/*.md"))})
    for name, markdown in documents.items():
        assert leaks(markdown) == [], name
        limit = NAME_MAX_CHARS if name == "analysis.md" else KERNEL_NAME_MAX_CHARS
        assert long_names(markdown, limit) == [], name
        head = re.split(r"^## Appendix", markdown, maxsplit=1, flags=re.MULTILINE)[0]
        assert "```sql" not in head, name
    markdown = documents["analysis.md"]
    appendix = markdown.split("\n## Appendix", 1)[1]
    for short, full in re.findall(r"^\| `([^`]+)` \| `+([^`]+)`+ \|$", appendix.split("### Kernel Names", 1)[-1], re.MULTILINE):
        assert len(short) <= NAME_MAX_CHARS < len(full) or short != full
