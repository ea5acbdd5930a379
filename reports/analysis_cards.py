"""The P-item cards of analysis.md: one view per ranked finding (its impact, claims, window on the
trace's clock, host activity and the analyzer's prose made safe), in rank order."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, HostActivity, RankedFinding, TracePhases
from tracelake.core.markdown_text import Markdown, TraceStrings, code, one_line
from tracelake.core.text_format import finite
from tracelake.reports.analysis_format import card_title, cell, fmt_ms, fmt_pct, fmt_value


def finding_kind(finding: RankedFinding) -> str:
    """compute | fusion | system: the report section a finding belongs to."""
    if finding.agent == "kernel_fusion" or finding.category == "kernel_fusion":
        return "fusion"
    return "compute" if finding.tier == "compute" else "system"


def _impact(finding: RankedFinding, e2e_ms: float) -> dict[str, Any]:
    mid = finite(finding.impact_score)
    if mid is None:
        return {"quantified": False, "text": Markdown(f"not quantifiable from trace data (estimate: "
                                                      f"{finding.estimate_method}, confidence: {finding.confidence})"),
                "low_ms": None, "mid_ms": None, "high_ms": None}
    low = finite(finding.impact_low)
    high = finite(finding.impact_high)
    low = mid if low is None else low
    high = mid if high is None else high
    mid_ms = finite(finding.recoverable_ms)
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
    low, high = finite(finding.impact_low), finite(finding.impact_high)
    mid = finite(finding.impact_score)
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


def trace_strings_by_agent(results: list[AgentResult]) -> dict[str, TraceStrings]:
    """Per agent, the trace strings its analyzer may have written into its findings' text."""
    return {r.agent: TraceStrings.of(r.metrics, [f.evidence for f in r.findings], [f.operations for f in r.findings])
            for r in results}


def agent_sentence(names: TraceStrings, markdown: str) -> Markdown:
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


def _on_trace_clock(stored_us: float, ts_base_us: int) -> str:
    """A stored timestamp on the trace's own clock, to 0.1 µs, the base added exactly (an absolute
    clock's µs are beyond float64's 0.1 µs steps)."""
    return f"{Decimal(ts_base_us) + Decimal(repr(stored_us)):.1f}"


def _window(finding: RankedFinding, trace_id: str, ts_base_us: int = 0) -> dict[str, Any] | None:
    """Where the finding's claims lie on the trace's clock (the template says it, with the command
    that cuts that window out)."""
    if finding.ts_start_us is None or finding.ts_end_us is None:
        return None
    return {"start": Markdown(_on_trace_clock(finding.ts_start_us, ts_base_us)),
            "end": Markdown(_on_trace_clock(finding.ts_end_us, ts_base_us)),
            "span_ms": (finding.ts_end_us - finding.ts_start_us) / 1000.0,
            "steps": finding.steps, "trace_id": trace_id}


def _host_activity(finding: RankedFinding) -> list[tuple[str, list[HostActivity]]]:
    """The python frames, then the host ops, that ran inside the finding's idle gaps, largest first."""
    groups = [(kind, [a for a in finding.host_activity if a.kind == kind]) for kind in ("python", "host_op")]
    return [(kind, items) for kind, items in groups if items]


def finding_card(finding: RankedFinding, e2e_ms: float, trace_strings: dict[str, TraceStrings],
          phases: TracePhases | None = None, trace_id: str = "", ts_base_us: int = 0,
          ranks: dict[str, int] | None = None) -> dict[str, Any]:
    kind = finding_kind(finding)
    names = trace_strings.get(finding.agent) or TraceStrings.of(finding.evidence, finding.operations)
    details, structured = _details(names.escape_in(finding.details))
    return {
        "rank": finding.global_rank,
        "title": card_title(finding),
        "insight": agent_sentence(names, finding.insight),
        "action": agent_sentence(names, finding.action),
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
        "claim": _claim(finding),
        "replay": _replay(finding, ranks or {}),
        "phase": _phase_text(finding.phase, phases or TracePhases()),
        "window": _window(finding, trace_id, ts_base_us),
        "host_activity": _host_activity(finding),
        "anchor": f"detail-p{finding.global_rank}",
        "sql_anchor": f"sql-p{finding.global_rank}",
    }


def _replay(finding: RankedFinding, ranks: dict[str, int]) -> dict[str, Any] | None:
    """What the what-if replay says of the finding (agents/sequencing.py): its saving on the
    replayed timeline, its kernel-level estimate, the finding it is realisable after."""
    if finding.kernel_level_ms is None:
        return None
    return {"saving_ms": finding.recoverable_ms or 0.0, "kernel_ms": finding.kernel_level_ms,
            "full_ms": finding.replayed_full_ms,
            "after_rank": ranks.get(finding.realisable_after or ""),
            "gated": (finding.recoverable_ms or 0.0) < settings.REPLAY_HELD_BACK_SHARE * finding.kernel_level_ms}


def _claim(finding: RankedFinding) -> dict[str, Any] | None:
    """What the finding's estimate rests on, from the claims ledger (finding_kernels / finding_gaps)."""
    if finding.claimed_time_ms is None:
        return None
    return {"time_ms": finding.claimed_time_ms, "gpu_events": finding.claimed_kernel_count,
            "idle_gaps": finding.claimed_gap_count}


def ranked_rows(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings in rank order, as priority_data.json lists them: one table row each."""
    return [{"rank": c["rank"], "title": c["title"], "anchor": f"p{c['rank']}", "category": c["category"],
             "impact_range": c["impact_range"], "confidence": c["confidence"]} for c in cards]
