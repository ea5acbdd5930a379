"""A trace that is not the workload (a GPU-graph capture, a harness) or whose device is unknown gets a
report that says so first and claims nothing beyond what it shows; a pipeline is titled as one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pipeline.conftest import copy_of
from tracelake.analyzers.contracts import PriorityData
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.reports.analysis_md import validate_analysis


@pytest.fixture(scope="module")
def scope_warehouse(scope_traces, tmp_path_factory: pytest.TempPathFactory):
    return copy_of(scope_traces.warehouse, tmp_path_factory, "scope_analysis")


def _analyze(warehouse, trace: Path, out: Path) -> tuple[list[str], PriorityData]:
    outcome = run_analysis(trace, warehouse, AnalyzeOptions(out_dir=out, jobs=1))
    markdown = (out / "analysis.md").read_text()
    priority = PriorityData.model_validate_json((out / "priority_data.json").read_text())
    assert validate_analysis(markdown, priority) == [] and outcome.report_problems == []
    return [line for line in markdown.splitlines() if line.strip()], priority


def test_a_capture_trace_says_so_first_and_claims_no_win(scope_warehouse, scope_traces, tmp_path: Path) -> None:
    lines, priority = _analyze(scope_warehouse, scope_traces.capture, tmp_path / "out")
    assert lines[1].startswith("> This trace is a GPU-graph capture trace, not the workload:")
    assert priority.findings and all(f.confidence == "low" and f.impact_score is None for f in priority.findings)
    gate = json.loads((tmp_path / "out" / "metadata" / "trace_quality.json").read_text())
    assert len(gate["workload_limits"]) == 1  # the capture explains its tiny GPU share: one reason


def test_a_workload_trace_opens_with_its_summary(scope_warehouse, scope_traces, tmp_path: Path) -> None:
    lines, priority = _analyze(scope_warehouse, scope_traces.pipeline, tmp_path / "out")
    assert lines[0] == "# SD3Transformer2DModel pipeline - H100 Standalone Analysis"
    assert lines[1] == "## Executive Summary"
    assert any(f.impact_score is not None and f.tier == "system" for f in priority.findings)  # BERT's idle time
    model = json.loads((tmp_path / "out" / "metadata" / "model_info.json").read_text())
    assert model["model"] == "SD3Transformer2DModel pipeline" and model["is_pipeline"]
    assert {"model", "architecture", "scale", "precision"} <= set(model)


def test_an_unknown_device_is_named_in_the_title(scope_warehouse, scope_traces, tmp_path: Path) -> None:
    lines, _ = _analyze(scope_warehouse, scope_traces.unknown_device, tmp_path / "out")
    assert lines[0] == "# BERT-small - H100 roofline, assumed (device `Foo GPU` not in the platforms seed) Standalone Analysis"
