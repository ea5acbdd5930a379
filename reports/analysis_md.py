"""Step 11: analysis.md from ReportInputs (jinja2, StrictUndefined).

The renderer only arranges what the pipeline gathered: numbers are formatted here, never computed
from a trace. Trace strings (names, shapes, file and device names) are data: the template escapes
every value it prints (core.markdown_text), what the report modules compose is escaped there, and
the markdown an analyzer wrote around names goes through TraceStrings. The template
(templates/analysis.md.j2) lays the report out and holds its fixed sentences (a card's claims,
window and host work are data here, words there); analysis.html is that markdown rendered for a
browser (reports.analysis_html), so both come from the one template. The view models come from
analysis_summary (title, timeline, Executive Summary), analysis_cards (the P-item cards) and
analysis_tables (the other tables); analysis_validation checks a rendered report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import ReplaySummary
from tracelake.core.markdown_text import Markdown, one_line, safe_markdown
from tracelake.core.templates import markdown_environment
from tracelake.core.text_format import finite
from tracelake.reports.analysis_cards import agent_sentence, finding_card, ranked_rows, trace_strings_by_agent
from tracelake.reports.analysis_format import (
    NAME_MAX_CHARS as NAME_MAX_CHARS,
    cell,
    fmt_ms,
    fmt_pct,
    fmt_signed_ms,
    fmt_signed_pct,
    shown_name as shown_name,
)
from tracelake.reports.analysis_html import PLOT_FILE
from tracelake.reports.analysis_summary import (
    analysis_window_view,
    failed_checks,
    gpu_view,
    linked_share_failed,
    metric_rows,
    quality_problems,
    summary_text,
    title_names,
    warning_lines,
)
from tracelake.reports.analysis_tables import (
    fusion_left_out,
    kernel_category_rows,
    kernel_name_rows,
    model_view,
    phase_rows,
    platform_view,
    quality_check_rows,
    top_operation_rows,
    unaddressed_rows,
)
from tracelake.reports.analysis_validation import SECTIONS as SECTIONS, validate_analysis as validate_analysis
from tracelake.reports.report_inputs import PLOT_PENDING, ReportInputs

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "analysis.md.j2"

_environment = markdown_environment(TEMPLATES)
_environment.filters.update(ms=fmt_ms, pct=fmt_pct, signed_ms=fmt_signed_ms, signed_pct=fmt_signed_pct,
                            cell=cell, one_line=one_line)


def _replay_view(summary: ReplaySummary | None, e2e_ms: float) -> dict[str, Any] | None:
    """The replay of all findings together, for the line under the ranked table."""
    if summary is None:
        return None
    path = None
    if summary.critical_path_ms:
        span = summary.critical_path_ms
        gpu = min(summary.critical_path_gpu_ms or 0.0, span)
        host = min(summary.critical_path_host_ms or 0.0, span - gpu)
        path = {"step": summary.critical_path_step, "ms": span, "gpu_ms": gpu, "gpu_pct": 100.0 * gpu / span,
                "host_ms": host, "host_pct": 100.0 * host / span, "between_ms": span - gpu - host,
                "between_pct": 100.0 * (span - gpu - host) / span,
                "gpu_bound": gpu >= settings.CRITICAL_PATH_GPU_BOUND_SHARE * span}
    return {"findings": summary.kernel_level_sum_ms > 0, "path": path, "combined_ms": summary.combined_ms,
            "combined_pct": 100.0 * summary.combined_ms / e2e_ms if e2e_ms else 0.0,
            "replayed_sum_ms": summary.replayed_sum_ms, "kernel_sum_ms": summary.kernel_level_sum_ms,
            "error_us": abs(summary.unchanged_error_us), "converged": summary.converged}


def _context(inputs: ReportInputs) -> dict[str, Any]:
    # impacts are % of the analysis window (the timeline less the window-edge idle), as the agents scored them
    e2e_ms = finite(inputs.priority.e2e_time_ms) or finite(inputs.gpu_utilization.get("total_time_ms")) or 0.0
    failed = failed_checks(inputs)
    # no linked GPU work: there is no timeline, and its numbers print as dashes, not as 0.000 ms
    timeline_missing = linked_share_failed(failed) is not None and not finite(inputs.gpu_utilization.get("total_time_ms"))
    gpu1 = gpu_view(None if timeline_missing else inputs.gpu_utilization)
    gpu2 = gpu_view(inputs.gpu_utilization2) if inputs.comparison_scope == "comparative" and inputs.gpu_utilization2 else None
    # a standalone table is of the analysis window when the window-edge idle is left out (the impacts' window)
    window = analysis_window_view(inputs, gpu1) if gpu2 is None else None
    ranked = sorted(inputs.priority.findings, key=lambda f: f.global_rank)
    trace_strings = trace_strings_by_agent(inputs.agent_results)
    # rank order, whatever the tier
    ranks = {f.finding_id: f.global_rank for f in ranked}
    cards = [finding_card(f, e2e_ms, trace_strings, inputs.phases, inputs.trace_id, inputs.ts_base_us, ranks)
             for f in ranked]
    by_kind = {kind: [c for c in cards if c["kind"] == kind] for kind in ("compute", "fusion", "system")}
    ranked_ids = {f.finding_id for f in ranked}
    unranked = [f for r in inputs.agent_results for f in r.findings if f.finding_id not in ranked_ids]
    model = inputs.model_info
    reproduce = [(one_line(label), sql.strip()) for label, sql in inputs.reproduce_sql if sql and sql.strip()]
    reproduce += [(f"Model identification query {i}", sql) for i, sql in enumerate(model.evidence_sql, start=1)]
    return {
        "title": title_names(inputs),
        "comparative": gpu2 is not None,
        "platform": inputs.platform,
        "platform2": inputs.platform2 or inputs.platform,
        "skipped_steps": [one_line(s) for s in inputs.skipped_steps if s and s.strip()],
        "graph_replay_steps": [one_line(s) for s in inputs.graph_replay_steps if s and s.strip()],
        "workload_limits": [one_line(s) for s in inputs.workload_limits if s and s.strip()],
        "quality_problems": quality_problems(failed),
        "timeline_missing": timeline_missing,
        "warnings": warning_lines(inputs),
        "summary": summary_text(inputs, gpu1, gpu2, cards),
        "ranked_rows": ranked_rows(cards),
        "replay": _replay_view(inputs.priority.replay, e2e_ms),
        "phase_rows": phase_rows(inputs.phases) if inputs.phases.is_serving else [],
        "steady_state_rule": (inputs.phases.steps[0].steady_state_rule if inputs.phases.is_serving else ""),
        "near_roofline": [one_line(line) for line in inputs.priority.near_roofline],
        "unaddressed": unaddressed_rows(inputs.priority),
        "kernel_categories": kernel_category_rows(inputs),
        "big_op_percent": settings.BIG_OP_PERCENT_OF_E2E,
        "finding_floor": settings.MIN_PITEM_IMPACT_SCORE,
        "metric_rows": metric_rows(inputs, window or gpu1, gpu2),
        "metric_window_ms": window and window["total_time_ms"],
        "plot": Markdown(inputs.plot_png_base64) if inputs.plot_png_base64 else None,  # base64, or PLOT_PENDING
        "gpu": gpu1,
        "top_operations": top_operation_rows(inputs),
        "matching_note": safe_markdown(one_line(inputs.op_matching_note or "")),  # markdown: names escaped
        "relabelled_ops_note": one_line(inputs.relabelled_ops_note) if inputs.relabelled_ops_note else None,
        "cards": cards,
        "compute_cards": by_kind["compute"],
        "fusion_cards": by_kind["fusion"],
        "fusion_left_out": fusion_left_out(inputs),
        "system_cards": by_kind["system"],
        "detail_cards": cards,
        "unranked": [{"title": one_line(f.title), "agent": f.agent,
                      "insight": agent_sentence(trace_strings[f.agent], f.insight)} for f in unranked],
        "kernel_names": kernel_name_rows(inputs, trace_strings),
        "model": model_view(model),
        "platforms": [p for p in (platform_view(inputs.platform_spec, inputs.platform),
                                  platform_view(inputs.platform_spec2, inputs.platform2 or inputs.platform)
                                  if inputs.comparison_scope == "comparative" else None) if p],
        "quality_checks": quality_check_rows(inputs),
        "agents": [{"agent": r.agent, "tier": r.tier, "status": r.status, "findings": len(r.findings),
                    "attempts": r.attempts} for r in inputs.agent_results],
        "trace_name": inputs.trace_name,
        "job": _job_view(inputs),
        "trace_id": inputs.trace_id,
        "trace2_name": inputs.trace2_name or None,
        "trace2_id": inputs.trace2_id,
        "mode": inputs.mode,
        "mode_reason": one_line(inputs.mode_reason),
        "scope": inputs.comparison_scope,
        "reproduce": reproduce,
    }


def _job_view(inputs: ReportInputs) -> dict[str, Any] | None:
    """The header line of a rank's report: its job, and the link to the job's report."""
    job = inputs.job
    if job is None:
        return None
    return {"name": job.name, "rank": job.rank, "world_size": job.world_size,
            "link": Markdown(f"[the job's report]({job.job_report})")}  # our relative path, pattern-checked


def embed_plot(markdown: str) -> str:
    """`markdown` rendered with plot_png_base64=PLOT_PENDING, its image linking the plot file written
    beside it (inline, the PNG's base64 was one line of ~100,000 characters in the markdown)."""
    if markdown.count(PLOT_PENDING) != 1:
        raise ValueError("the rendered report does not hold exactly one pending plot")
    return markdown.replace(f"data:image/png;base64,{PLOT_PENDING}", PLOT_FILE)


def render_analysis(inputs: ReportInputs) -> str:
    """analysis.md for one trace (or a trace pair)."""
    text = _environment.get_template(TEMPLATE).render(**_context(inputs))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"
