"""`tracelake analyze` and `tracelake platforms` through the real command line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from tests.conftest import TRACES, run_cli
from tracelake.analyzers.contracts import PriorityData
from tracelake.cli import TOP_FINDINGS_PRINTED


def test_analyze_writes_the_perf_report(warehouse, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(warehouse.root, folder)
    out = tmp_path / "out"
    trace = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
    result = run_cli("analyze", str(trace), "--warehouse", str(folder), "--out", str(out), "--xlsx", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "platform MI300X" in result.stdout  # detected from "AMD Instinct MI300X"
    _assert_top_findings_printed(result.stdout, out)
    csvs = {p.stem for p in (out / "perf_report_csvs").glob("*.csv")}
    assert {"gpu_timeline", "ops_summary_by_category", "ops_summary", "ops_unique_args", "unified_perf_summary",
            "kernel_summary", "GEMM", "CONV_fwd", "Normalization", "UnaryElementwise", "BinaryElementwise",
            "Reduce_fwd"} <= csvs
    with (out / "perf_report_csvs" / "gpu_timeline.csv").open() as handle:
        rows = {row["type"]: float(row["time ms"]) for row in csv.DictReader(handle)}
    assert rows["total_time"] > rows["busy_time"] > 0
    from openpyxl import load_workbook  # noqa: PLC0415 - only this test reads xlsx

    workbook = load_workbook(out / "perf_report.xlsx", read_only=True)
    assert set(workbook.sheetnames) == csvs

    again = run_cli("analyze", str(trace), "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert again.returncode == 0 and "already" not in again.stderr
    assert {p.stem for p in (out / "perf_report_csvs").glob("*.csv")} == csvs
    assert not list(out.glob(".perf_report_csvs-*"))


def _assert_top_findings_printed(stdout: str, out: Path) -> None:
    """After "wrote .../analysis.md": the first three findings of priority_data.json, one line each
    (P, impact range, title), and nothing else."""
    lines = stdout.splitlines()
    wrote = next(i for i, line in enumerate(lines) if line.startswith("wrote "))
    assert lines[wrote] == f"wrote {out / 'analysis.md'}"
    priority = PriorityData.model_validate_json((out / "priority_data.json").read_text())
    expected = sorted(priority.findings, key=lambda f: f.global_rank)[:TOP_FINDINGS_PRINTED]
    assert len(expected) == TOP_FINDINGS_PRINTED  # the resnet trace has more findings than are printed
    printed = [line.split("  ") for line in lines[wrote + 1:]]
    assert [(p[0], p[2]) for p in printed] == [(f"P{f.global_rank}", " ".join(f.title.split())) for f in expected]
    for (_, impact, _), finding in zip(printed, expected):
        if finding.impact_score is None:
            assert impact.startswith("not quantified")
        else:
            assert impact.startswith(f"{finding.impact_low:.1f}-{finding.impact_high:.1f} % of E2E (")


def test_platforms_lists_specs_with_sources() -> None:
    result = run_cli("platforms", "--format", "json")
    assert result.returncode == 0, result.stderr
    specs = {spec["platform"]: spec for spec in json.loads(result.stdout)}
    assert {"MI300X", "MI325X", "MI350X", "MI355X", "H100", "H200", "B200", "A100"} <= set(specs)
    assert specs["MI300X"]["kind"] == "measured_max_achievable"
    assert specs["MI300X"]["peaks_tflops"]["matrix_bf16"] == 708 and specs["MI300X"]["mem_bw_gbps"] == 5300
    assert specs["H100"]["kind"] == "vendor_peak" and specs["H100"]["source"]


def test_analyze_missing_trace_is_one_line(tmp_path: Path) -> None:
    result = run_cli("analyze", str(tmp_path / "nope.json.gz"), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
