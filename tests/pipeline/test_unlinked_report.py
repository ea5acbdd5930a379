"""`analyze` on a trace whose GPU work nothing links (no flows, no correlations) opens the report
with the failing quality check instead of an empty timeline reported as fine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import LinkingTraces
from tests.pipeline.conftest import copy_of
from tracelake.analyzers.contracts import PriorityData
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.reports.analysis_md import validate_analysis

FIRST_SCREEN_LINES = 10  # what a reader sees before scrolling


@pytest.fixture(scope="module")
def unlinked_report(linking_traces: LinkingTraces, tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = copy_of(linking_traces.warehouse, tmp_path_factory, "unlinked")
    out = tmp_path_factory.mktemp("unlinked_report") / "report"
    run_analysis(linking_traces.variants / "unlinkable.json.gz", warehouse,
                 AnalyzeOptions(platform="MI300X", out_dir=out, jobs=1))
    return out


def test_the_failing_link_check_opens_the_report(unlinked_report: Path) -> None:
    markdown = (unlinked_report / "analysis.md").read_text()
    first_screen = "\n".join(markdown.splitlines()[:FIRST_SCREEN_LINES])
    assert "## Executive Summary" in first_screen
    head = first_screen.split("## Executive Summary")[0]
    assert "Trace quality: 1 check(s) failed" in head
    assert "`linked_gpu_time_share`: mostly unlinked: only 0.0% of the GPU time (61 of 61 GPU events unlinked)" in head


def test_the_summary_does_not_report_an_empty_timeline_as_fine(unlinked_report: Path) -> None:
    markdown = (unlinked_report / "analysis.md").read_text()
    summary = markdown.split("## Executive Summary")[1].split("\n## ")[0]
    assert "has no GPU timeline: none of its GPU work could be tied to a host launch" in summary
    assert "0.000 ms" not in summary and "spans" not in summary
    assert "No optimization opportunity was found" not in markdown
    assert "| Total Time | — |" in summary
    assert "No system-level bottlenecks detected" not in markdown
    priority = PriorityData.model_validate_json((unlinked_report / "priority_data.json").read_text())
    assert validate_analysis(markdown, priority) == []


def test_the_quality_gate_records_the_failure(unlinked_report: Path) -> None:
    gate = json.loads((unlinked_report / "metadata" / "trace_quality.json").read_text())
    verdicts = {c["check_name"]: (c["value"], c["verdict"]) for c in gate["checks"]}
    assert verdicts["linked_gpu_time_share"] == (0.0, "fail")
    assert verdicts["unlinked_gpu_events"] == (61.0, "info")
