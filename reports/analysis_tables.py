"""The tables of analysis.md beside the cards: serving phases, top operations, unaddressed ops,
kernel categories, platforms and the appendix's kernel names."""

from __future__ import annotations

import re
from typing import Any

from tracelake.analyzers import settings
from tracelake.analyzers.compute_text import slower_side
from tracelake.analyzers.contracts import PriorityData, TracePhases
from tracelake.analyzers.model_id import UNKNOWN, ModelInfo
from tracelake.core.kernel_names import short_kernel_name, shortens
from tracelake.core.markdown_text import Markdown, TraceStrings, code_cell, one_line, safe_markdown, text
from tracelake.core.text_format import finite
from tracelake.reports.analysis_format import (
    DASH,
    NAME_MAX_CHARS,
    cell,
    fmt_ms,
    fmt_pct,
    fmt_signed_ms,
    fmt_value,
    shown_name,
)
from tracelake.reports.report_inputs import ReportInputs


def phase_rows(phases: TracePhases) -> list[dict[str, str]]:
    """The Executive Summary's phase table: the serving steps by phase (steady-state steps when a
    phase has any, else all of its steps)."""
    rows = []
    order = {"prefill": 0, "mixed": 1, "decode": 2, "denoise": 3}
    for name in sorted(phases.phase_names, key=lambda n: (order.get(n, 9), n)):
        steps = [s for s in phases.steps if s.phase == name]
        steady = [s for s in steps if s.in_steady_state] or steps
        gpu_us = sum(s.gpu_time_us for s in steady)
        busy_us = sum(s.gpu_busy_us for s in steady)
        batches = sorted({s.batch_size for s in steady if s.batch_size is not None})
        tokens = [(s.prefill_tokens or 0) + (s.decode_tokens or 0) for s in steady
                  if s.prefill_tokens is not None or s.decode_tokens is not None]
        # a diffusion request is one annotation around all its denoising steps: one transformer call each
        denoise_calls = sum(s.model_calls for s in steady) if name == "denoise" else 0
        per_step = denoise_calls or len(steady)
        rows.append({
            "phase": name,
            "steps": (f"{sum(s.model_calls for s in steps)} ({steps[0].model_class} calls in "
                      f"{len(steps)} request{'s' if len(steps) > 1 else ''})" if denoise_calls else f"{len(steps)}"),
            "steady": f"{len([s for s in steps if s.in_steady_state])} of {len(steps)}",
            "batch": "/".join(str(b) for b in batches) if batches else DASH,
            "tokens": f"{round(sum(tokens) / len(tokens)):,}" if tokens else DASH,
            "step_ms": fmt_ms(gpu_us / per_step / 1000.0),
            "gpu_ms": fmt_ms(gpu_us / 1000.0),
            "busy": fmt_pct(100.0 * busy_us / gpu_us) if gpu_us > 0 else DASH,
        })
    return rows


def platform_view(spec: dict[str, Any] | None, platform: str) -> dict[str, Any] | None:
    if spec is None:
        return None
    peaks = spec.get("peaks_tflops") or spec.get("peak_tflops") or {
        k: v for k, v in spec.items() if re.match(r"^(matrix|vector)_", str(k))}
    kind = str(spec.get("kind") or "")
    kind_text = {"measured_max_achievable": "measured max-achievable throughput",
                 "vendor_peak": "vendor datasheet peak (dense)"}.get(kind, kind or DASH)
    bandwidth = finite(spec.get("mem_bw_gbps"))
    return {
        "platform": platform,
        "display_name": spec.get("display_name") or platform,
        "kind": kind_text,
        "source": one_line(spec.get("source") or DASH),
        "mem_bw_tbs": DASH if bandwidth is None else Markdown(f"{bandwidth / 1000:.2f}"),
        "memory_gb": fmt_value("memory_gb", spec.get("memory_gb")) if spec.get("memory_gb") is not None else DASH,
        "peaks": [(cell(name), Markdown(f"{finite(value):g}") if finite(value) is not None else DASH)
                  for name, value in sorted(dict(peaks).items())],
    }


def top_operation_rows(inputs: ReportInputs) -> list[dict[str, str]]:
    rows = []
    for rank, row in enumerate(inputs.top_operations, start=1):
        pct_roofline = finite(row.get("pct_roofline"))
        bound = row.get("bound")
        rows.append({
            "rank": str(rank),
            "name": code_cell(shown_name(one_line(row.get("name") or DASH))),
            "category": cell(row.get("category") or DASH),
            "count": fmt_value("count", row.get("count")),
            "time_ms": fmt_ms(row.get("time_ms")),
            "percent_of_e2e": fmt_pct(row.get("percent_of_e2e")),
            "pct_roofline": DASH if pct_roofline is None else Markdown(f"{fmt_pct(pct_roofline)}%"),
            "bound": cell(str(bound).lower().replace("_", "-")) if bound else DASH,
            # comparative scope: trace 2's side of the op's match (absent: no match)
            "count2": fmt_value("count", row.get("count2")) if row.get("count2") is not None else DASH,
            "time2_ms": fmt_ms(row.get("time2_ms")) if row.get("time2_ms") is not None else DASH,
            "difference_ms": (fmt_signed_ms(row["time2_ms"] - row["time_ms"])
                              if row.get("time2_ms") is not None and row.get("time_ms") is not None else DASH),
            "slower_side": slower_side(row.get("time_ms"), row.get("time2_ms")),
            "matched_by": {"name_and_shapes": "name + shapes", "module_path": "model layer"}.get(
                str(row.get("matched_by")), "not matched"),
        })
    return rows


def unaddressed_rows(priority: PriorityData) -> list[dict[str, Any]]:
    """The large op signatures no finding claims, with the reason (analyzers/coverage.py)."""
    return [{"name": code_cell(shown_name(op.name)), "category": cell(op.op_category), "time_ms": fmt_ms(op.time_ms),
             "percent": f"{op.percent_of_e2e:.1f}",
             "efficiency": "—" if op.efficiency_percent is None else f"{op.efficiency_percent:.1f} %",
             "reason": text(one_line(op.reason))}
            for op in priority.unaddressed_ops]


def kernel_name_rows(inputs: ReportInputs, trace_strings: dict[str, TraceStrings]) -> list[tuple[Markdown, Markdown]]:
    """(short, full) of every kernel name the report shortened, for the appendix; call it after
    the cards and sentences were written (the trace strings record what they shortened)."""
    full = {one_line(row.get("name")): short_kernel_name(one_line(row.get("name")), NAME_MAX_CHARS)
            for row in inputs.top_operations if row.get("name") and shortens(one_line(row.get("name")), NAME_MAX_CHARS)}
    for names in trace_strings.values():
        full.update(names.shortened)
    return [(code_cell(short), code_cell(name)) for name, short in sorted(full.items(), key=lambda item: (item[1], item[0]))]


def kernel_category_rows(inputs: ReportInputs) -> list[dict[str, Markdown]]:
    """GPU time by kernel category (no CPU ops), with each category's longest kernel."""
    return [{"category": cell(row.get("category")), "count": fmt_value("count", row.get("kernel_count")),
             "time_ms": fmt_ms(row.get("time_ms")), "percent": fmt_pct(row.get("percent_of_kernel_time")),
             "longest": code_cell(shown_name(one_line(row.get("longest_kernel") or DASH)))}
            for row in inputs.kernel_categories]


def quality_check_rows(inputs: ReportInputs) -> list[dict[str, Markdown]]:
    """The appendix's trace-quality table, one row per check in check order."""
    return [{
        "name": cell(c.get("check_name", DASH)),
        "value": fmt_value("value", c.get("value")),
        "threshold": fmt_value("threshold", c.get("threshold")),
        "verdict": cell(c.get("verdict", DASH)),
        "detail": cell(c.get("detail", "")),
    } for c in inputs.quality_checks]


def model_view(model: ModelInfo) -> dict[str, Any]:
    """The appendix's model identification: what it is and the evidence (markdown: names as code)."""
    return {
        "name": cell(model.display_name if model.display_name != "Workload" else UNKNOWN),
        "family": cell(model.model_family),
        "architecture": cell(model.architecture),
        "scale": cell(model.scale),
        "precision": cell(model.precision),
        "engine": cell(model.serving_engine) if model.serving_engine else None,
        "confidence": model.confidence,
        "evidence": [safe_markdown(one_line(e)) for e in model.evidence],
    }


def fusion_left_out(inputs: ReportInputs) -> list[Markdown]:
    """The fusion candidates found that are no card, each with why: what the fusion section says
    instead of "none detected" when the agent did find candidates."""
    result = next((r for r in inputs.agent_results if r.agent == "kernel_fusion"), None)
    carded = {f.title for f in result.findings} if result is not None else set()
    rows: list[Markdown] = []
    for candidate in (result.metrics.get("candidates") or []) if result is not None else []:
        if candidate["name"] in carded:
            continue
        if candidate["status"] != "estimated":
            why = candidate.get("reject_reason") or "no saving estimated"
        elif candidate["impact_mid"] < settings.MIN_PITEM_IMPACT_SCORE:
            why = (f"estimated at {candidate['impact_mid']:.2f} % of E2E, below the {settings.MIN_PITEM_IMPACT_SCORE:g} % "
                   "a finding needs")
        else:
            why = f"beyond the {settings.MAX_FUSION_FINDINGS} fusion findings a report lists"
        rows.append(Markdown(f"{text(one_line(candidate['name']))}: {safe_markdown(one_line(why))}"))
    return rows
