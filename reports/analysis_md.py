"""Step 11: analysis.md from ReportInputs (jinja2, StrictUndefined), and its validation.

The renderer only arranges what the pipeline gathered: numbers are formatted here, never computed
from a trace. Trace strings (names, shapes, file and device names) are data: the template escapes
every value it prints (core.markdown_text), what this module composes is escaped here, and the
markdown an analyzer wrote around names goes through TraceStrings. ``validate_analysis`` checks a
rendered (or hand-edited) report against the priority data: the ``##`` sections and their order,
the title, leftover template placeholders, the P-item cards (one per ranked finding, numbered by
global rank) and the Executive Summary metric table.
"""

from __future__ import annotations

import base64
import json
import math
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, PriorityData, RankedFinding, TracePhases
from tracelake.analyzers.model_id import UNKNOWN
from tracelake.core.kernel_names import KERNEL_NAME_MAX_CHARS, short_kernel_name, shortens
from tracelake.core.markdown_text import EMPTY, Markdown, TraceStrings, blank_code, code, code_cell, one_line, safe_markdown, text
from tracelake.core.templates import markdown_environment
from tracelake.reports.report_inputs import PLOT_PENDING, ReportInputs

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "analysis.md.j2"

SECTIONS = (
    "Executive Summary",
    "Warnings",
    "Compute Kernel Optimizations",
    "Kernel Fusion Opportunities (Experimental)",
    "System-Level Optimizations",
    "Detailed Analysis",
    "Appendix",
)
OPTIONAL_SECTIONS = frozenset({"Warnings"})
# Every P-item card, of whatever tier, stands here in rank order (priority_data.json's), so that P1 is
# the first finding a reader sees; the fusion and system sections list their tier's P-items.
CARDS_SECTION = "Compute Kernel Optimizations"
METRIC_ROWS = ("Total Time", "Compute %", "Idle %", "Exposed Communication %", "Top Bottleneck Category")
DASH = EMPTY
# Outside the appendix no code span or table cell is longer than a short kernel name: kernel names
# are shortened (core.kernel_names) and listed whole in the appendix's "Kernel names" table.
NAME_MAX_CHARS = KERNEL_NAME_MAX_CHARS
# The trace-quality check that grades how much GPU time is linked to a host launch (trace_quality.sql);
# when it fails, the timeline and every finding describe only the linked part of the GPU work.
LINKED_SHARE_CHECK = "linked_gpu_time_share"
HEURISTIC_NOTE = ("Heuristic estimate: a fixed share of the measured time is credited as recoverable; "
                  "it is not a gap to a performance model.")

_environment = markdown_environment(TEMPLATES)


# ---- number and text formatting ------------------------------------------------------------------

def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


# Numbers are ours: they come out as Markdown, so that the template prints them as they are.

def fmt_ms(value: Any) -> Markdown:
    """Milliseconds with 3 decimals; a dash when missing."""
    number = _finite(value)
    return Markdown(DASH if number is None else f"{number:,.3f}")


def fmt_pct(value: Any) -> Markdown:
    """A percentage with 1 decimal (no % sign); tiny non-zero values as <0.1."""
    number = _finite(value)
    if number is None:
        return Markdown(DASH)
    if 0 < abs(number) < 0.05:
        return Markdown("<0.1" if number > 0 else ">-0.1")
    return Markdown(f"{number:.1f}")


def fmt_signed_ms(value: Any) -> Markdown:
    number = _finite(value)
    return Markdown(DASH if number is None else f"{number:+,.3f}")


def fmt_signed_pct(value: Any) -> Markdown:
    number = _finite(value)
    return Markdown(DASH if number is None else f"{number:+.1f}")


def fmt_value(key: str, value: Any) -> Markdown:
    """An evidence value for a Data table cell: units by key suffix, compact JSON for structures,
    strings (trace names among them) as literal text."""
    if value is None:
        return Markdown(DASH)
    if isinstance(value, bool):
        return Markdown("yes" if value else "no")
    if isinstance(value, int):
        return Markdown(f"{value:,}" if abs(value) >= 10000 else str(value))
    if isinstance(value, float):
        number = _finite(value)
        if number is None:
            return Markdown(DASH)
        if key.endswith(("_ms", "_time_ms")):
            return Markdown(f"{number:,.3f} ms")
        if key.endswith("_us"):
            return Markdown(f"{number:,.1f} us")
        if "percent" in key or key.endswith("_pct") or key.startswith("pct_"):
            return Markdown(f"{fmt_pct(number)}%")
        return Markdown(f"{number:.4g}")
    if isinstance(value, dict):
        items = [f"{k}: {_scalar(v)}" for k, v in list(value.items())[:8]]
        return cell(", ".join(items) + (f", ... ({len(value)} keys)" if len(value) > 8 else "")) if items \
            else Markdown(DASH)
    if isinstance(value, (list, tuple)):
        if not value:
            return Markdown(DASH)
        if any(isinstance(v, (dict, list, tuple)) for v in value):
            return Markdown(f"{len(value)} entries (see the finding's SQL in the Appendix)")
        items = [_scalar(v) for v in value[:10]]
        return cell(", ".join(items) + (f", ... ({len(value)} in all)" if len(value) > 10 else ""))
    return cell(str(value))


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        number = _finite(value)
        return DASH if number is None else f"{number:.4g}"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)[:40]
    return DASH if value is None else str(value)


def cell(value: Any) -> Markdown:
    """`value` as literal text for a table cell (a dash when empty)."""
    return text(value) or Markdown(DASH)


def shown_name(name: str) -> str:
    """An op or kernel name as a table shows it: a kernel name short (core.kernel_names, the full
    name in the appendix), any other name clipped to NAME_MAX_CHARS (the SQL shows it whole)."""
    if shortens(name, NAME_MAX_CHARS):
        return short_kernel_name(name, NAME_MAX_CHARS)
    return name if len(name) <= NAME_MAX_CHARS else name[: NAME_MAX_CHARS - 3].rstrip() + "..."


def card_title(finding: RankedFinding) -> Markdown:
    """A finding's title as its card and its Detailed Analysis heading show it."""
    return text(one_line(finding.title))


_environment.filters.update(ms=fmt_ms, pct=fmt_pct, signed_ms=fmt_signed_ms, signed_pct=fmt_signed_pct,
                            cell=cell, one_line=one_line)


# ---- view models ----------------------------------------------------------------------------------

def finding_kind(finding: RankedFinding) -> str:
    """compute | fusion | system: the report section a finding belongs to."""
    if finding.agent == "kernel_fusion" or finding.category == "kernel_fusion":
        return "fusion"
    return "compute" if finding.tier == "compute" else "system"


def _impact(finding: RankedFinding, e2e_ms: float) -> dict[str, Any]:
    mid = _finite(finding.impact_score)
    if mid is None:
        return {"quantified": False, "text": Markdown(f"not quantifiable from trace data (estimate: "
                                                      f"{finding.estimate_method}, confidence: {finding.confidence})"),
                "low_ms": None, "mid_ms": None, "high_ms": None}
    low = _finite(finding.impact_low)
    high = _finite(finding.impact_high)
    low = mid if low is None else low
    high = mid if high is None else high
    mid_ms = _finite(finding.recoverable_ms)
    mid_ms = mid * e2e_ms / 100.0 if mid_ms is None else mid_ms
    low_ms, high_ms = low * e2e_ms / 100.0, high * e2e_ms / 100.0
    impact = (f"{fmt_pct(low)}–{fmt_pct(high)}% of E2E ({fmt_ms(low_ms)}–{fmt_ms(high_ms)} ms; "
              f"mid {fmt_pct(mid)}% ≈ {fmt_ms(mid_ms)} ms); estimate: {finding.estimate_method}; "
              f"confidence: {finding.confidence}")
    return {"quantified": True, "text": Markdown(impact), "low_ms": low_ms, "mid_ms": mid_ms, "high_ms": high_ms}


def _impact_range(finding: RankedFinding, impact: dict[str, Any]) -> Markdown:
    """A finding's impact range for the ranked table: % of E2E and ms, or that it has no estimate."""
    if not impact["quantified"]:
        return Markdown(f"not quantified ({finding.estimate_method})")
    low, high = _finite(finding.impact_low), _finite(finding.impact_high)
    mid = _finite(finding.impact_score)
    low, high = mid if low is None else low, mid if high is None else high
    return Markdown(f"{fmt_pct(low)}–{fmt_pct(high)}% ({fmt_ms(impact['low_ms'])}–{fmt_ms(impact['high_ms'])} ms)")


def _evidence_rows(finding: RankedFinding) -> list[tuple[Markdown, Markdown]]:
    return [(cell(key.replace("_", " ")), fmt_value(key, value)) for key, value in finding.evidence.items()]


_DETAIL_LABELS = ("identification", "data", "reasoning", "resolution", "impact estimate")


def _details(details: Markdown) -> tuple[Markdown, bool]:
    """The agent's detailed analysis (made safe) with headings demoted to bold text (so it cannot
    open a report section or a P card); True when it already carries the Identification/Data/
    Reasoning/Resolution/Impact estimate structure."""
    lines = [re.sub(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", r"**\1**", line) for line in details.strip().splitlines()]
    demoted = "\n".join(lines).strip()
    labels = {label for label in _DETAIL_LABELS if re.search(rf"\*\*{label}[^*]*\*\*", demoted, re.IGNORECASE)}
    return Markdown(demoted), len(labels) >= 3


def _trace_strings(results: list[AgentResult]) -> dict[str, TraceStrings]:
    """Per agent, the trace strings its analyzer may have written into its findings' text."""
    return {r.agent: TraceStrings.of(r.metrics, [f.evidence for f in r.findings], [f.operations for f in r.findings])
            for r in results}


def _sentence(names: TraceStrings, markdown: str) -> Markdown:
    """An analyzer's one-paragraph markdown (an insight, an action), made safe, on one line."""
    return Markdown(one_line(names.escape_in(markdown)))


def _phase_text(phase: str | None, phases: TracePhases) -> str | None:
    """The card's phase line: "decode (batch 32)", "decode (batch 32) + prefill (batch 15)"."""
    if phase is None:
        return None
    parts = []
    for name in phase.split(" + "):
        batches = sorted({s.batch_size for s in phases.steps if s.phase == name and s.batch_size is not None})
        batch = f" (batch {'/'.join(str(b) for b in batches)})" if batches else ""
        parts.append(f"{name}{batch}")
    return " + ".join(parts)


def _phase_rows(phases: TracePhases) -> list[dict[str, str]]:
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
        rows.append({
            "phase": name,
            "steps": f"{len(steps)}",
            "steady": f"{len([s for s in steps if s.in_steady_state])} of {len(steps)}",
            "batch": "/".join(str(b) for b in batches) if batches else DASH,
            "tokens": f"{round(sum(tokens) / len(tokens)):,}" if tokens else DASH,
            "step_ms": fmt_ms(gpu_us / len(steady) / 1000.0),
            "gpu_ms": fmt_ms(gpu_us / 1000.0),
            "busy": fmt_pct(100.0 * busy_us / gpu_us) if gpu_us > 0 else DASH,
        })
    return rows


def _on_trace_clock(stored_us: float, ts_base_us: int) -> str:
    """A stored timestamp on the trace's own clock, to 0.1 µs, the base added exactly (an absolute
    clock's µs are beyond float64's 0.1 µs steps)."""
    return f"{Decimal(ts_base_us) + Decimal(repr(stored_us)):.1f}"


def _window_text(finding: RankedFinding, trace_id: str, ts_base_us: int = 0) -> Markdown | None:
    """Where the finding's claims lie on the trace's clock, and the command that cuts that window out."""
    if finding.ts_start_us is None or finding.ts_end_us is None:
        return None
    steps = finding.steps
    step_text = ""
    if steps:
        step_text = (f"; ProfilerStep#{steps[0]}" if len(steps) == 1
                     else f"; ProfilerStep#{steps[0]}-#{steps[-1]} ({len(steps)} steps)")
    span_ms = (finding.ts_end_us - finding.ts_start_us) / 1000.0
    command = f"tracelake export {trace_id} --finding P{finding.global_rank} --out p{finding.global_rank}.json"
    start, end = _on_trace_clock(finding.ts_start_us, ts_base_us), _on_trace_clock(finding.ts_end_us, ts_base_us)
    return Markdown(f"trace time {start}-{end} us ({fmt_ms(span_ms)} ms)"
                    f"{step_text}; open it in Perfetto: {code(command)}")


def _host_activity_text(finding: RankedFinding) -> Markdown | None:
    """The python frames and host ops that ran inside the finding's idle gaps, largest first."""
    if not finding.host_activity:
        return None
    parts = []
    for kind, label in (("python", "python frames"), ("host_op", "host ops")):
        items = [a for a in finding.host_activity if a.kind == kind]
        if items:
            listed = ", ".join(f"{code(one_line(a.name))} {fmt_ms(a.time_ms)} ms ({a.calls}x)" for a in items)
            parts.append(f"{label}: {listed}")
    return Markdown("; ".join(parts))


def _card(finding: RankedFinding, e2e_ms: float, trace_strings: dict[str, TraceStrings],
          phases: TracePhases | None = None, trace_id: str = "", ts_base_us: int = 0) -> dict[str, Any]:
    kind = finding_kind(finding)
    names = trace_strings.get(finding.agent) or TraceStrings.of(finding.evidence, finding.operations)
    details, structured = _details(names.escape_in(finding.details))
    return {
        "rank": finding.global_rank,
        "title": card_title(finding),
        "insight": _sentence(names, finding.insight),
        "action": _sentence(names, finding.action),
        "impact": (impact := _impact(finding, e2e_ms)),
        "impact_range": _impact_range(finding, impact),
        "heuristic": finding.estimate_method == "heuristic",
        "kind": kind,
        "agent": finding.agent,
        "tier": finding.tier,
        "category": finding.category,
        "confidence": finding.confidence,
        "estimate_method": finding.estimate_method,
        "operations": [code(op) for op in finding.operations[:10]],
        "more_operations": max(0, len(finding.operations) - 10),
        "evidence": _evidence_rows(finding),
        "details": details,
        "structured_details": structured,
        "sql": finding.evidence_sql.strip(),
        "analysis_sql": finding.analysis_sql.strip(),
        "claim": _claim_text(finding),
        "phase": _phase_text(finding.phase, phases or TracePhases()),
        "window": _window_text(finding, trace_id, ts_base_us),
        "host_activity": _host_activity_text(finding),
        "anchor": f"detail-p{finding.global_rank}",
        "sql_anchor": f"sql-p{finding.global_rank}",
    }


def _claim_text(finding: RankedFinding) -> Markdown | None:
    """What the finding's estimate rests on, from the claims ledger (finding_kernels / finding_gaps)."""
    if finding.claimed_time_ms is None:
        return None
    parts = [f"{finding.claimed_kernel_count} GPU event(s)" if finding.claimed_kernel_count else "",
             f"{finding.claimed_gap_count} GPU idle gap(s)" if finding.claimed_gap_count else ""]
    return Markdown(f"{fmt_ms(finding.claimed_time_ms)} ms of GPU time ({', '.join(p for p in parts if p)}), "
                    "counted in no other finding")


def _ranked_rows(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings in rank order, as priority_data.json lists them: one table row each."""
    return [{"rank": c["rank"], "title": c["title"], "anchor": f"p{c['rank']}", "category": c["category"],
             "impact_range": c["impact_range"], "confidence": c["confidence"]} for c in cards]


def _title(inputs: ReportInputs) -> Markdown:
    model = one_line(inputs.title_model or "")
    if not model or model in (UNKNOWN, "Unknown model", "None"):
        model = inputs.model_info.display_name
    platform = inputs.platform_title or inputs.platform
    if inputs.comparison_scope == "comparative":
        return Markdown(f"# {text(model)} - Comparative Analysis: {text(platform)} vs "
                        f"{text(inputs.platform2_title or inputs.platform2 or inputs.platform)}")
    return Markdown(f"# {text(model)} - {text(platform)} Standalone Analysis")


def _gpu(values: dict[str, float] | None) -> dict[str, float | None]:
    values = values or {}
    total = _finite(values.get("total_time_ms"))
    out: dict[str, float | None] = {"total_time_ms": total}
    for key in ("computation", "idle", "exposed_comm", "exposed_memcpy", "busy"):
        pct = _finite(values.get(f"{key}_time_percent"))
        ms = _finite(values.get(f"{key}_time_ms"))
        if pct is None and ms is not None and total:
            pct = 100.0 * ms / total
        if ms is None and pct is not None and total is not None:
            ms = pct * total / 100.0
        out[f"{key}_percent"], out[f"{key}_ms"] = pct, ms
    return out


def _metric_rows(inputs: ReportInputs, gpu1: dict, gpu2: dict | None) -> list[dict[str, str]]:
    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else b - a

    def ms(value: float | None) -> Markdown:
        return Markdown(DASH if value is None else f"{fmt_ms(value)} ms")

    def pct(value: float | None) -> Markdown:
        return Markdown(DASH if value is None else f"{fmt_pct(value)}%")

    rows = [
        ("Total Time", ms(gpu1["total_time_ms"]), gpu2 and ms(gpu2["total_time_ms"]), "total_time_ms"),
        ("Compute %", pct(gpu1["computation_percent"]), gpu2 and pct(gpu2["computation_percent"]),
         "computation_percent"),
        ("Idle %", pct(gpu1["idle_percent"]), gpu2 and pct(gpu2["idle_percent"]), "idle_percent"),
        ("Exposed Communication %", pct(gpu1["exposed_comm_percent"]), gpu2 and pct(gpu2["exposed_comm_percent"]),
         "exposed_comm_percent"),
    ]
    result = []
    for label, value1, value2, key in rows:
        row = {"label": label, "value1": value1, "value2": value2 or DASH, "difference": DASH}
        if gpu2 is not None:
            delta = diff(gpu1[key], gpu2[key])
            if key == "total_time_ms":
                relative = 100.0 * delta / gpu1[key] if delta is not None and gpu1[key] else None
                row["difference"] = DASH if delta is None else \
                    Markdown(f"{fmt_signed_ms(delta)} ms ({fmt_signed_pct(relative)}%)")
            else:
                row["difference"] = DASH if delta is None else Markdown(f"{fmt_signed_pct(delta)} pp")
        result.append(row)
    result.append({"label": "Top Bottleneck Category", "value1": cell(inputs.top_bottleneck_category or DASH),
                   "value2": cell(inputs.top_bottleneck_category2 or DASH), "difference": DASH})
    return result


def _warnings(inputs: ReportInputs) -> list[str]:
    warnings = [one_line(w) for w in inputs.warnings if w and w.strip()]
    for result in inputs.agent_results:
        if result.status == "ERROR" and not any(result.agent in w for w in warnings):
            warnings.append(f"agent {result.agent} ({result.tier} tier) failed: {one_line(result.error or 'no error text')}; "
                            "its category is missing from the findings")
    return warnings


def _platform_view(spec: dict[str, Any] | None, platform: str) -> dict[str, Any] | None:
    if spec is None:
        return None
    peaks = spec.get("peaks_tflops") or spec.get("peak_tflops") or {
        k: v for k, v in spec.items() if re.match(r"^(matrix|vector)_", str(k))}
    kind = str(spec.get("kind") or "")
    kind_text = {"measured_max_achievable": "measured max-achievable throughput",
                 "vendor_peak": "vendor datasheet peak (dense)"}.get(kind, kind or DASH)
    bandwidth = _finite(spec.get("mem_bw_gbps"))
    return {
        "platform": platform,
        "display_name": spec.get("display_name") or platform,
        "kind": kind_text,
        "source": one_line(spec.get("source") or DASH),
        "mem_bw_tbs": DASH if bandwidth is None else Markdown(f"{bandwidth / 1000:.2f}"),
        "memory_gb": fmt_value("memory_gb", spec.get("memory_gb")) if spec.get("memory_gb") is not None else DASH,
        "peaks": [(cell(name), Markdown(f"{_finite(value):g}") if _finite(value) is not None else DASH)
                  for name, value in sorted(dict(peaks).items())],
    }


def _top_operations(inputs: ReportInputs) -> list[dict[str, str]]:
    rows = []
    for rank, row in enumerate(inputs.top_operations, start=1):
        pct_roofline = _finite(row.get("pct_roofline"))
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
            "efficiency": (Markdown(f"{fmt_pct(row['efficiency_percent'])}%")
                           if _finite(row.get("efficiency_percent")) is not None else DASH),
            "matched_by": {"name_and_shapes": "name + shapes", "module_path": "model layer"}.get(
                str(row.get("matched_by")), "not matched"),
        })
    return rows


def _failed_checks(inputs: ReportInputs) -> list[dict[str, Any]]:
    """The trace-quality checks that failed, in check order: the report opens with them."""
    return [c for c in inputs.quality_checks if c.get("verdict") == "fail"]


def _quality_problems(failed: list[dict[str, Any]]) -> list[dict[str, Markdown]]:
    return [{"name": code(one_line(c.get("check_name") or DASH)), "detail": text(one_line(c.get("detail") or ""))}
            for c in failed]


def _linked_share_failed(failed: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in failed if c.get("check_name") == LINKED_SHARE_CHECK), None)


UNLINKED_CHECK = "unlinked_gpu_events"


def _timeline_sentence(inputs: ReportInputs, gpu1: dict, linked_share: dict[str, Any] | None) -> str:
    breakdown = (f"{fmt_pct(gpu1['computation_percent'])}% computation, {fmt_pct(gpu1['idle_percent'])}% idle, "
                 f"{fmt_pct(gpu1['exposed_comm_percent'])}% exposed communication and "
                 f"{fmt_pct(gpu1['exposed_memcpy_percent'])}% exposed memory copies.")
    if linked_share is None:
        unlinked = next((c for c in inputs.quality_checks if c.get("check_name") == UNLINKED_CHECK
                         and (c.get("value") or 0) > 0), None)
        warned = any(c.get("check_name") == LINKED_SHARE_CHECK and c.get("verdict") == "warn" for c in inputs.quality_checks)
        detail = one_line(unlinked.get("detail") or "").split(";")[0] if unlinked is not None else ""
        left_out = (f" {text(detail)}: that GPU work is outside these numbers (trace quality {code(LINKED_SHARE_CHECK)} "
                    "warns)." if detail and warned else "")
        return (f"The trace {code(inputs.trace_name)} spans {fmt_ms(gpu1['total_time_ms'])} ms of GPU time: "
                f"{breakdown}{left_out}")
    check = code(LINKED_SHARE_CHECK)
    if not gpu1["total_time_ms"]:
        return (f"The trace {code(inputs.trace_name)} has no GPU timeline: none of its GPU work could be tied to a "
                f"host launch, by flow or by correlation id (trace quality {check} failed, see above), so nothing "
                "below measures its GPU time.")
    share = _finite(linked_share.get("value"))
    share_text = "less than half" if share is None else f"only {fmt_pct(100.0 * share)}%"
    return (f"Of the GPU time of {code(inputs.trace_name)}, {share_text} could be tied to a host launch (trace "
            f"quality {check} failed, see above); that linked part spans {fmt_ms(gpu1['total_time_ms'])} ms: {breakdown}")


def _analysis_window_sentence(inputs: ReportInputs, gpu1: dict) -> str:
    """When the window-edge idle is left out of E2E, what the impact percentages are of."""
    measured, window = _finite(gpu1.get("total_time_ms")), _finite(inputs.priority.e2e_time_ms)
    if not measured or not window or abs(measured - window) < 1e-9:
        return ""
    return (f"{fmt_ms(measured - window)} ms of that is idle at the profile window's edges (a first or last gap "
            f"of the timeline long enough to be host set-up, not a step), so every impact below is a % of the "
            f"{fmt_ms(window)} ms analysis window without it (E2E).")


def _capture_merge_sentence(inputs: ReportInputs) -> str:
    """What the graph-capture merge did (trace_quality graph_replay, `info` once the capture traces
    attribute every replayed GPU event)."""
    replay = next((c for c in inputs.quality_checks if c.get("check_name") == "graph_replay"), None)
    if replay is None or replay.get("verdict") != "info":
        return ""
    return f"GPU-graph replay with its capture traces: {text(one_line(replay.get('detail') or ''))}."


def _summary(inputs: ReportInputs, gpu1: dict, gpu2: dict | None, cards: list[dict[str, Any]]) -> Markdown:
    parts = []
    failed = _failed_checks(inputs)
    platform, platform2 = text(inputs.platform), text(inputs.platform2 or inputs.platform)
    if gpu2 is not None and gpu1["total_time_ms"] and gpu2["total_time_ms"]:
        t1, t2 = gpu1["total_time_ms"], gpu2["total_time_ms"]
        if t2 < t1:
            speed = f"Trace 2 ({platform2}) is {fmt_pct(100.0 * (t1 - t2) / t1)}% faster"
        elif t2 > t1:
            speed = f"Trace 2 ({platform2}) is {fmt_pct(100.0 * (t2 - t1) / t1)}% slower"
        else:
            speed = "Both traces take the same time"
        parts.append(f"{speed} than trace 1 ({platform}): {fmt_ms(t2)} ms vs {fmt_ms(t1)} ms of GPU time.")
    else:
        parts.append(_timeline_sentence(inputs, gpu1, _linked_share_failed(failed)))
        parts.append(_analysis_window_sentence(inputs, gpu1))
        parts.append(_capture_merge_sentence(inputs))
    quantified = [c for c in cards if c["impact"]["quantified"]]
    if quantified:
        best = quantified[0]
        parts.append(f"{len(cards)} finding(s) are ranked below; the largest, P{best['rank']} "
                     f"({best['title']}), could recover {best['impact']['text'].split(' (')[0]}.")
    elif cards:
        parts.append(f"{len(cards)} finding(s) are listed below; none carries a time estimate.")
    elif failed:
        parts.append("No finding was made from what the trace supports; the failing trace-quality checks above say "
                     "what it lacks, so this is no sign that the workload has no bottleneck.")
    elif inputs.skipped_steps:
        parts.append("No finding was made from what the trace supports; the fallback note above says which analyses "
                     "it does not allow, so this is no sign that the workload has no bottleneck.")
    else:
        parts.append("No optimization opportunity was found.")
    parts.append(f"Analysis mode: {text(inputs.mode)} ({text(inputs.mode_reason)}).")
    return Markdown(" ".join(part for part in parts if part))


def _context(inputs: ReportInputs) -> dict[str, Any]:
    # impacts are % of the analysis window (the timeline less the window-edge idle), as the agents scored them
    e2e_ms = _finite(inputs.priority.e2e_time_ms) or _finite(inputs.gpu_utilization.get("total_time_ms")) or 0.0
    failed = _failed_checks(inputs)
    # no linked GPU work: there is no timeline, and its numbers print as dashes, not as 0.000 ms
    timeline_missing = _linked_share_failed(failed) is not None and not _finite(inputs.gpu_utilization.get("total_time_ms"))
    gpu1 = _gpu(None if timeline_missing else inputs.gpu_utilization)
    gpu2 = _gpu(inputs.gpu_utilization2) if inputs.comparison_scope == "comparative" and inputs.gpu_utilization2 else None
    ranked = sorted(inputs.priority.findings, key=lambda f: f.global_rank)
    trace_strings = _trace_strings(inputs.agent_results)
    cards = [_card(f, e2e_ms, trace_strings, inputs.phases, inputs.trace_id, inputs.ts_base_us) for f in ranked]  # rank order, whatever the tier
    by_kind = {kind: [c for c in cards if c["kind"] == kind] for kind in ("compute", "fusion", "system")}
    ranked_ids = {f.finding_id for f in ranked}
    unranked = [f for r in inputs.agent_results for f in r.findings if f.finding_id not in ranked_ids]
    model = inputs.model_info
    reproduce = [(one_line(label), sql.strip()) for label, sql in inputs.reproduce_sql if sql and sql.strip()]
    reproduce += [(f"Model identification query {i}", sql) for i, sql in enumerate(model.evidence_sql, start=1)]
    return {
        "title": _title(inputs),
        "heuristic_note": HEURISTIC_NOTE,
        "comparative": gpu2 is not None,
        "platform": inputs.platform,
        "platform2": inputs.platform2 or inputs.platform,
        "skipped_steps": [one_line(s) for s in inputs.skipped_steps if s and s.strip()],
        "workload_limits": [one_line(s) for s in inputs.workload_limits if s and s.strip()],
        "quality_problems": _quality_problems(failed),
        "timeline_missing": timeline_missing,
        "warnings": _warnings(inputs),
        "summary": _summary(inputs, gpu1, gpu2, cards),
        "ranked_rows": _ranked_rows(cards),
        "phase_rows": _phase_rows(inputs.phases) if inputs.phases.is_serving else [],
        "steady_state_rule": (inputs.phases.steps[0].steady_state_rule if inputs.phases.is_serving else ""),
        "near_roofline": [one_line(line) for line in inputs.priority.near_roofline],
        "unaddressed": _unaddressed_rows(inputs.priority),
        "kernel_categories": [{"category": cell(row.get("category")), "count": fmt_value("count", row.get("kernel_count")),
                               "time_ms": fmt_ms(row.get("time_ms")), "percent": fmt_pct(row.get("percent_of_kernel_time")),
                               "longest": code_cell(shown_name(one_line(row.get("longest_kernel") or DASH)))}
                              for row in inputs.kernel_categories],
        "big_op_percent": settings.BIG_OP_PERCENT_OF_E2E,
        "finding_floor": settings.MIN_PITEM_IMPACT_SCORE,
        "metric_rows": _metric_rows(inputs, gpu1, gpu2),
        "plot": Markdown(inputs.plot_png_base64) if inputs.plot_png_base64 else None,  # base64, or PLOT_PENDING
        "gpu": gpu1,
        "top_operations": _top_operations(inputs),
        "matching_note": safe_markdown(one_line(inputs.op_matching_note or "")),  # markdown: names escaped
        "relabelled_ops_note": one_line(inputs.relabelled_ops_note) if inputs.relabelled_ops_note else None,
        "cards": cards,
        "compute_cards": by_kind["compute"],
        "fusion_cards": by_kind["fusion"],
        "system_cards": by_kind["system"],
        "detail_cards": cards,
        "unranked": [{"title": one_line(f.title), "agent": f.agent,
                      "insight": _sentence(trace_strings[f.agent], f.insight)} for f in unranked],
        "kernel_names": _kernel_names(inputs, trace_strings),
        "model": {
            "name": cell(model.display_name if model.display_name != "Workload" else UNKNOWN),
            "family": cell(model.model_family),
            "architecture": cell(model.architecture),
            "scale": cell(model.scale),
            "precision": cell(model.precision),
            "confidence": model.confidence,
            "evidence": [safe_markdown(one_line(e)) for e in model.evidence],  # markdown: names as code
        },
        "platforms": [p for p in (_platform_view(inputs.platform_spec, inputs.platform),
                                  _platform_view(inputs.platform_spec2, inputs.platform2 or inputs.platform)
                                  if inputs.comparison_scope == "comparative" else None) if p],
        "quality_checks": [{
            "name": cell(c.get("check_name", DASH)),
            "value": fmt_value("value", c.get("value")),
            "threshold": fmt_value("threshold", c.get("threshold")),
            "verdict": cell(c.get("verdict", DASH)),
            "detail": cell(c.get("detail", "")),
        } for c in inputs.quality_checks],
        "agents": [{"agent": r.agent, "tier": r.tier, "status": r.status, "findings": len(r.findings),
                    "attempts": r.attempts} for r in inputs.agent_results],
        "trace_name": inputs.trace_name,
        "trace_id": inputs.trace_id,
        "trace2_name": inputs.trace2_name or None,
        "trace2_id": inputs.trace2_id,
        "mode": inputs.mode,
        "mode_reason": one_line(inputs.mode_reason),
        "scope": inputs.comparison_scope,
        "reproduce": reproduce,
    }


def _unaddressed_rows(priority: PriorityData) -> list[dict[str, Any]]:
    """The large op signatures no finding claims, with the reason (analyzers/coverage.py)."""
    return [{"name": code_cell(shown_name(op.name)), "category": cell(op.op_category), "time_ms": fmt_ms(op.time_ms),
             "percent": f"{op.percent_of_e2e:.1f}",
             "efficiency": "—" if op.efficiency_percent is None else f"{op.efficiency_percent:.1f} %",
             "reason": text(one_line(op.reason))}
            for op in priority.unaddressed_ops]


def _kernel_names(inputs: ReportInputs, trace_strings: dict[str, TraceStrings]) -> list[tuple[Markdown, Markdown]]:
    """(short, full) of every kernel name the report shortened, for the appendix; call it after
    the cards and sentences were written (the trace strings record what they shortened)."""
    full = {one_line(row.get("name")): short_kernel_name(one_line(row.get("name")), NAME_MAX_CHARS)
            for row in inputs.top_operations if row.get("name") and shortens(one_line(row.get("name")), NAME_MAX_CHARS)}
    for names in trace_strings.values():
        full.update(names.shortened)
    return [(code_cell(short), code_cell(name)) for name, short in sorted(full.items(), key=lambda item: (item[1], item[0]))]


def embed_plot(markdown: str, png: bytes) -> str:
    """`markdown` rendered with plot_png_base64=PLOT_PENDING, with the plot in place."""
    if markdown.count(PLOT_PENDING) != 1:
        raise ValueError("the rendered report does not hold exactly one pending plot")
    return markdown.replace(PLOT_PENDING, base64.b64encode(png).decode())


def render_analysis(inputs: ReportInputs) -> str:
    """analysis.md for one trace (or a trace pair)."""
    text = _environment.get_template(TEMPLATE).render(**_context(inputs))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.rstrip("\n") + "\n"


# ---- validation ---------------------------------------------------------------------------------------

_DATA_URI = re.compile(r"\(data:image/[a-z]+;base64,[A-Za-z0-9+/=\s]*\)")
_CARD = re.compile(r"^### P(\d+): (.*?)\s*$", re.MULTILINE)
_P_REFERENCE = re.compile(r"(?<![\w/.-])P(\d+)(?![\w])")
_TITLE_STANDALONE = re.compile(r"^# (?P<model>.+?) - (?P<platform>\S.*?) Standalone Analysis$")
_TITLE_COMPARATIVE = re.compile(r"^# (?P<model>.+?) - Comparative Analysis: (?P<p1>\S.*?) vs (?P<p2>\S.*?)$")
_PLACEHOLDERS = (
    (re.compile(r"\{\{"), "template expression '{{'"),
    (re.compile(r"\{%"), "template statement '{%'"),
    (re.compile(r"\bTODO\b"), "TODO"),
    (re.compile(r"<placeholder>", re.IGNORECASE), "<placeholder>"),
    (re.compile(r"\bNone\s*(%|ms\b)"), "'None %' / 'None ms' (a missing number)"),
    (re.compile(r"\bnan\b", re.IGNORECASE), "'nan' (a missing number)"),
    (re.compile(r"\b(?:inf|Infinity)\b"), "'inf' (a broken number)"),
)
# <Model>, <platform>, <Brief Title>, ...: angle-bracket words that are not HTML tags the report uses.
# These checks read the prose only (code blocks and spans hold names and SQL, shown literally), and
# trace text in prose never spells them: markdown_text.text writes '<' as '&lt;', '{{' as '{\{' and
# the first letter of TODO / nan / inf / None / P<n> as a character reference.
_ANGLE_PLACEHOLDER = re.compile(r"<(?!/?(?:a|br|sub|sup|b|i|em|strong|details|summary|code|span)\b)[A-Za-z][A-Za-z _-]*>")


def _strip_images(markdown: str) -> str:
    return _DATA_URI.sub("(data:image)", markdown)


def _prose(markdown: str) -> str:
    """The text with code blocks, inline code and embedded images blanked (for marker scans)."""
    return blank_code(_strip_images(markdown))


def _sections(markdown: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every ``##`` section outside code blocks."""
    prose = blank_code(markdown)
    heads = [(m.group(1).strip(), m.start()) for m in re.finditer(r"^## (?!#)(.+)$", prose, re.MULTILINE)]
    return [(name, start, heads[i + 1][1] if i + 1 < len(heads) else len(markdown))
            for i, (name, start) in enumerate(heads)]


def _check_sections(sections: list[tuple[str, int, int]]) -> list[str]:
    problems = []
    names = [name for name, _, _ in sections]
    for name in SECTIONS:
        if name not in OPTIONAL_SECTIONS and name not in names:
            problems.append(f"section '## {name}' is missing")
        if names.count(name) > 1:
            problems.append(f"section '## {name}' appears {names.count(name)} times")
    for name in names:
        if name not in SECTIONS:
            problems.append(f"unexpected section '## {name}'")
    known = [n for n in dict.fromkeys(names) if n in SECTIONS]
    if known != sorted(known, key=SECTIONS.index):
        problems.append("sections are out of order: " + ", ".join(known) + " (expected "
                        + ", ".join(n for n in SECTIONS if n in known) + ")")
    return problems


def _check_title(markdown: str, priority: PriorityData) -> list[str]:
    first = next((line for line in markdown.splitlines() if line.strip()), "")
    standalone = _TITLE_STANDALONE.match(first)
    comparative = _TITLE_COMPARATIVE.match(first)
    if not first.startswith("# "):
        return ["the report does not start with a '# ' title line"]
    if not (standalone or comparative):
        return [f"title {first!r} is neither '# <Model> - <Platform> Standalone Analysis' nor "
                "'# <Model> - Comparative Analysis: <Platform1> vs <Platform2>'"]
    if priority.comparison_scope == "comparative" and not comparative:
        return ["the priority data is comparative but the title is a standalone one"]
    if priority.comparison_scope == "standalone" and not standalone:
        return ["the priority data is standalone but the title is a comparative one"]
    return []


def _check_placeholders(markdown: str) -> list[str]:
    prose = _prose(markdown)
    problems = []
    if PLOT_PENDING in markdown:
        problems.append("leftover placeholder: the plot was never embedded")
    for pattern, label in _PLACEHOLDERS:
        hits = [m for m in pattern.finditer(prose)]
        if hits:
            line = prose.count("\n", 0, hits[0].start()) + 1
            problems.append(f"leftover placeholder {label}: {len(hits)} occurrence(s), first on line {line}")
    hits = list(_ANGLE_PLACEHOLDER.finditer(prose))
    if hits:
        problems.append("leftover placeholder(s) " + ", ".join(sorted({m.group(0) for m in hits})[:5]))
    return problems


def _check_markers(markdown: str, sections: list[tuple[str, int, int]], priority: PriorityData) -> list[str]:
    problems = []
    by_rank = {f.global_rank: f for f in priority.findings}
    cards = []  # (rank, title, offset) of every card heading outside code, its title as written
    for outside_code in _CARD.finditer(blank_code(markdown)):
        heading = _CARD.match(markdown, outside_code.start())
        if heading:
            cards.append((int(heading.group(1)), heading.group(2), heading.start()))
    seen: dict[int, int] = {}
    for rank, title, position in cards:
        seen[rank] = seen.get(rank, 0) + 1
        finding = by_rank.get(rank)
        if finding is None:
            problems.append(f"card P{rank} ({title!r}) matches no finding with global rank {rank}")
            continue
        expected_title = card_title(finding)
        if expected_title != title:
            problems.append(f"card P{rank} is titled {title!r} but the finding ranked {rank} is {expected_title!r}")
        section = next((name for name, start, end in sections if start <= position < end), None)
        if section != CARDS_SECTION:
            problems.append(f"card P{rank} is under '{section}' but belongs under '{CARDS_SECTION}'")
    for rank, count in sorted(seen.items()):
        if count > 1 and rank in by_rank:
            problems.append(f"finding P{rank} has {count} cards (expected exactly one)")
    for rank, finding in sorted(by_rank.items()):
        if rank not in seen:
            problems.append(f"ranked finding P{rank} ({one_line(finding.title)!r}) has no card")
    ranks = [r for r, _, _ in cards]
    if ranks != sorted(ranks):
        problems.append("the cards are not in rank order: " + ", ".join(f"P{r}" for r in ranks))
    unknown = sorted({int(m.group(1)) for m in _P_REFERENCE.finditer(_prose(markdown))} - set(by_rank))
    if unknown:
        problems.append("references to P-items that do not exist: " + ", ".join(f"P{r}" for r in unknown))
    ranks = sorted(by_rank)
    if ranks != list(range(1, len(ranks) + 1)):
        problems.append("the priority data's global ranks are not contiguous from 1")
    return problems


def _check_metric_table(markdown: str, sections: list[tuple[str, int, int]]) -> list[str]:
    summary = next(((s, e) for name, s, e in sections if name == "Executive Summary"), None)
    if summary is None:
        return ["no Executive Summary metric table (section missing)"]
    block = markdown[summary[0]:summary[1]]
    if not re.search(r"^\|.*\|\s*$", block, re.MULTILINE):
        return ["the Executive Summary has no metric table"]
    problems = []
    for label in METRIC_ROWS:
        rows = re.findall(rf"^\|\s*{re.escape(label)}\s*\|(.*)\|\s*$", block, re.MULTILINE)
        if not rows:
            problems.append(f"metric table row '{label}' is missing")
        elif len(rows) > 1:
            problems.append(f"metric table row '{label}' appears {len(rows)} times")
        elif not rows[0].strip(" |") or re.search(r"\|\s*(X ms|Y%|Z%|W%)\s*(\||$)", "|" + rows[0]):
            problems.append(f"metric table row '{label}' has no value")
    return problems


def validate_analysis(markdown: str, priority: PriorityData) -> list[str]:
    """Problems in a rendered analysis.md; an empty list means the report is valid."""
    if len(markdown.strip()) < 100:
        return ["the report is empty or shorter than 100 characters"]
    text = _strip_images(markdown)  # section offsets below refer to this text
    sections = _sections(text)
    return (_check_title(text, priority) + _check_sections(sections) + _check_placeholders(text)
            + _check_metric_table(text, sections) + _check_markers(text, sections, priority))
