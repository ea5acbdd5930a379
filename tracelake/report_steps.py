"""The last analysis steps: analysis.md (and its HTML and plot) from the ranked findings, then the
record of the analysis in the warehouse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from tracelake.analysis_facts import AnalysisFacts
from tracelake.analysis_record import ReportRecord
from tracelake.analysis_runner import AnalysisRunner
from tracelake.analyze_options import AnalyzeOptions
from tracelake.analyzers import trace_overview
from tracelake.analyzers.comparison import category_times
from tracelake.analyzers.contracts import AgentResult, PriorityData
from tracelake.analyzers.model_id import ModelInfo
from tracelake.finding_steps import AgentRun
from tracelake.reports.analysis_html import PLOT_FILE, render_analysis_html
from tracelake.reports.analysis_md import embed_plot, render_analysis, validate_analysis
from tracelake.reports.comparative_report import report_fields
from tracelake.reports.report_inputs import PLOT_PENDING, ReportInputs
from tracelake.reports.trace_export import ts_base_us
from tracelake.trace_steps import CategoryData


def _report_warnings(warnings: list[str], results: list[AgentResult]) -> list[str]:
    failed = [r for r in results if r.status == "ERROR"]
    return list(warnings) + [f"agent {r.agent} did not complete: {r.error}" for r in failed
                             if not any(r.agent in w for w in warnings)]


def _report_inputs(db: duckdb.DuckDBPyConnection, trace: Path, facts: AnalysisFacts, priority: PriorityData,
                   results: list[AgentResult], model_info: ModelInfo, warnings: list[str],
                   options: AnalyzeOptions) -> dict[str, Any]:
    trace_id, platform, gate = facts.trace.trace_id, facts.trace.platform.name, facts.trace.gate
    top_operations = (trace_overview.top_operations(db, trace_id, platform, priority.e2e_time_ms)
                      if gate.gpu_events_present else trace_overview.top_cpu_operations(db, trace_id))
    ranked = [f for f in priority.findings if f.impact_score is not None]
    top_category = ranked[0].category if ranked else (top_operations[0]["category"] if top_operations else "n/a")
    return {
        "title_model": model_info.display_name,
        "platform": platform, "platform2": None, "comparison_scope": "standalone",
        "mode": facts.mode or "unknown", "mode_reason": facts.mode_reason, "trace_name": trace.name,
        "trace_id": trace_id, "job": options.job, "ts_base_us": ts_base_us(db, trace_id),
        "gpu_utilization": facts.trace.gpu.model_dump(), "gpu_utilization2": None,
        "top_bottleneck_category": top_category, "priority": priority, "agent_results": results,
        "top_operations": top_operations, "model_info": model_info, "platform_spec": facts.platform_spec,
        "quality_checks": [c.model_dump() for c in gate.checks], "warnings": _report_warnings(warnings, results),
        "skipped_steps": gate.skipped_steps, "graph_replay_steps": gate.graph_replay_steps,
        "workload_limits": gate.workload_limits,
        # without CPU ops the kernels' categories (from their names) are what the trace still tells
        "kernel_categories": (trace_overview.kernel_categories(db, trace_id)
                              if gate.gpu_events_present and not gate.cpu_ops_present else []),
        "reproduce_sql": trace_overview.reproduce_queries(trace_id, platform),
        "plot_png_base64": PLOT_PENDING,
        "relabelled_ops_note": None,
        "phases": facts.phases,
    }


def write_analysis_report(db: duckdb.DuckDBPyConnection, trace: Path, compare: Path | None, facts: AnalysisFacts,
                          categories: CategoryData, priority: PriorityData, findings: list[AgentResult],
                          model_info: ModelInfo, options: AnalyzeOptions, runner: AnalysisRunner) -> list[str]:
    """analysis.md and analysis.html (rendered while the plot process draws; the PNG goes in
    last); the problems validate_analysis finds in the markdown."""
    fields = _report_inputs(db, trace, facts, priority, findings, model_info, runner.warnings, options)
    second, comparison = facts.trace2, categories.op_comparison
    if comparison is not None and compare is not None and second is not None:
        extra = report_fields(
            comparison, facts.trace.gpu.total_time_ms, compare.name, second.gpu.model_dump(),
            category_times(db, facts.trace.trace_id, facts.trace.platform.name), categories.categories2,
            facts.platform_specs[comparison.platform2])
        fields.update(extra, reproduce_sql=fields["reproduce_sql"] + extra["reproduce_sql"])
    fields.update(platform_source=facts.trace.platform.source, device_name=facts.trace.platform.device_name,
                  platform2_source=second.platform.source if second else None,
                  device2_name=second.platform.device_name if second else None)
    markdown = render_analysis(ReportInputs(**fields))
    runner.write("analysis.html", render_analysis_html(markdown, f"{trace.name}: TraceLake analysis"))
    png = runner.plot_png()
    runner.write(PLOT_FILE, png)
    markdown = embed_plot(markdown)
    problems = validate_analysis(markdown, priority)
    runner.write("analysis.md", markdown)
    return problems


def record_analysis(record: ReportRecord, agents: AgentRun, priority: PriorityData, findings: list[AgentResult],
                    out_dir: Path) -> None:
    """The findings' rows, staged to land in the warehouse with the report in `out_dir`."""
    record.stage(agents.ctx, priority, findings, out_dir)
