"""A compute agent's P-item as a Finding: its title, insight, members table, impact explanation,
confidence (lowered by trace-quality checks) and the SQL that reproduces its numbers.

Unlike TraceLens, every card lists its member ops with their shapes and is titled after its
dominant op and shape."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import jinja2

from tracelake.analyzers import comparison, settings
from tracelake.analyzers.compute_records import (
    TITLE_NAME_MAX_CHARS,
    AgentData,
    ComputeAgent,
    OpGroup,
    OpRecord,
)
from tracelake.analyzers.compute_text import fmt, slower_side
from tracelake.analyzers.confidence import at_most, lowered
from tracelake.analyzers.contracts import AnalysisContext, Confidence, Finding
from tracelake.core.markdown_text import sql_literal
from tracelake.core.templates import template_environment
from tracelake.core.text_format import clip

TEMPLATES = Path(__file__).parent / "templates"
LEAD_NAME_MAX_CHARS = 100  # op names are clipped in insight sentences; full names stay in the data tables
QUALITY_CHECKS_FOR_COMPUTE = (  # trace_quality checks a kernel-time finding depends on (SPEC §5 gate)
    "dropped_events",
    "linked_gpu_time_share",
    "graph_replay",
    "cpu_ops_present",
    "same_stream_overlaps",
    "zero_duration_events",
    "gpu_events_before_window",
)

def finding_confidence(group: OpGroup, ctx: AnalysisContext) -> tuple[Confidence, list[str]]:
    """high for a perf-model estimate, medium for a heuristic or re-labelled one; one step lower
    per warned trace-quality check class (any warn -> one step, any fail -> low)."""
    reasons = []
    if group.estimate_method == "quantified":
        confidence: Confidence = "high"
        reasons.append("perf model and roofline for every member")
    else:
        confidence = "medium"
        reasons.append("no perf model: heuristic share of the op's time")
    if group.relabelled:
        confidence = at_most(confidence, "medium")
        reasons.append("category re-labelled from kernel names")
    verdicts = {name: ctx.quality_verdicts.get(name) for name in QUALITY_CHECKS_FOR_COMPUTE}
    failed = sorted(n for n, v in verdicts.items() if v == "fail")
    warned = sorted(n for n, v in verdicts.items() if v == "warn")
    if failed:
        confidence = "low"
        reasons.append("trace-quality check failed: " + ", ".join(failed))
    elif warned:
        confidence = lowered(confidence)
        reasons.append("trace-quality warning: " + ", ".join(warned))
    return confidence, reasons


@cache
def _evidence_templates() -> jinja2.Environment:
    return template_environment(TEMPLATES)


def _ladder_factors(group: OpGroup) -> list[tuple[str, float]]:
    if group.estimate_method == "quantified":
        return [("low", settings.TARGET_LOW), ("mid", settings.TARGET_MID), ("high", settings.TARGET_HIGH)]
    return [("low", settings.HEURISTIC_FRACTION_LOW), ("mid", settings.HEURISTIC_FRACTION_MID),
            ("high", settings.HEURISTIC_FRACTION_HIGH)]


def evidence_sql(group: OpGroup, ctx: AnalysisContext) -> str:
    """SQL over op_perf and gpu_timeline that reproduces the members' numbers and impacts."""
    if group.comparative and ctx.trace2_id:
        return comparison.evidence_sql(ctx.trace_id, ctx.platform, ctx.trace2_id, ctx.platform2 or ctx.platform,
                                       [(op.name, op.input_dims, op.input_type) for op in group.members])
    values = {
        "trace_id": sql_literal(ctx.trace_id),
        "platform": sql_literal(ctx.platform),
        "keys": ", ".join(sql_literal(op.signature_key) for op in group.members),
        "quantified": group.estimate_method == "quantified",
        "factors": _ladder_factors(group),
    }
    if group.chain:
        template = "compute_chain_evidence.sql.j2"
    else:
        template = "compute_evidence.sql.j2"
        values["attainable"] = [(sql_literal(op.signature_key), op.attainable_percent,
                                 "true" if op.is_latency_bound else "false") for op in group.members]
        values["kernel_floor_us"] = settings.KERNEL_TIME_FLOOR_US
    return _evidence_templates().get_template(template).render(values).rstrip("\n")


KNOWN_BOUNDS = ("compute", "memory")
TITLE_BOUNDS = (*KNOWN_BOUNDS, "latency")  # a latency-bound group's title says so; its roofline is still memory or compute
KNOWN_BUCKETS = ("0-30", "30-60", "60-100")  # efficiency_bucket's; "unknown" and "all" (comparative) say nothing


def group_phrase(group: OpGroup) -> str:
    """What a quantified group shares, in words: only the facts it has (no 'unknown-bound', no
    'all' bucket of a comparative run)."""
    parts = [f"{group.bound}-bound"] if group.bound in TITLE_BOUNDS else []
    if group.bucket in KNOWN_BUCKETS:
        parts.append(f"efficiency bucket {group.bucket} %")
    return ", ".join(parts) or "one op family"


def efficiency_phrase(group: OpGroup) -> str:
    span = group.efficiency_range
    if span is None:
        return "an unknown share of the roofline"
    low, high = span
    value = f"{low:.1f} %" if abs(high - low) < 0.05 else f"{low:.1f}-{high:.1f} %"
    return f"{value} of the {group.bound}-bound roofline" if group.bound in KNOWN_BOUNDS else f"{value} of the roofline"


def best_observed_sentence(group: OpGroup) -> str:
    """The evidence behind the dominant member's attainable share, when another trace of the
    warehouse ran the same op faster on this GPU (op_best_observed)."""
    op = group.dominant
    if op.best_observed_trace is None or op.best_observed_percent is None or group.comparative:
        return ""
    return (f"Best observed: the same op and shapes ran at {op.best_observed_percent:.1f} % of roofline on this GPU "
            f"in `{op.best_observed_trace}`, taken as its attainable share.")


def trace2_time_ms(group: OpGroup) -> float:
    return sum(op.comparison.time_trace2_ms for op in group.members if op.comparison is not None)


def group_title(group: OpGroup, assumed_platform: str | None = None) -> str:
    """The finding's title; a % of roofline read against an assumed platform names it as assumed."""
    if group.title:
        return group.title
    dominant = group.dominant
    more = f" +{len(group.members) - 1} more" if len(group.members) > 1 else ""
    library = f" ({group.library})" if group.library != "Unknown" else ""
    if group.comparative:
        t2 = trace2_time_ms(group)
        if group.slower_trace == 2:
            return f"{dominant.label}{more}: trace 2 takes {t2 / group.time_ms:.2f}x the time of trace 1{library}"
        ratio = f"{group.time_ms / t2:.2f}x the time of trace 2" if t2 > 0 else "no time on trace 2"
        return f"{dominant.label}{more}: trace 1 takes {ratio}{library}"
    if group.estimate_method == "heuristic":
        return f"{dominant.label}{more}: {group.percent_of_e2e:.1f} % of E2E without a perf model{library}"
    span = group.efficiency_range
    eff = ("an unknown share" if span is None else
           f"{_percent_text(span[0])}-{_percent_text(span[1])} %" if _percent_text(span[0]) != _percent_text(span[1])
           else f"{_percent_text(span[0])} %")
    bound = f"{group.bound}-bound at " if group.bound in TITLE_BOUNDS else "at "
    roofline = f"the assumed {assumed_platform} roofline" if assumed_platform else "roofline"
    return f"{dominant.label}{more}: {bound}{eff} of {roofline}{library}"


def _percent_text(value: float) -> str:
    """A title's efficiency: whole percents, one decimal below 1 % (0.4 %, not 0 %)."""
    return f"{value:.1f}" if value < 1.0 else f"{value:.0f}"


def lead_insight(group: OpGroup, noun: str) -> str:
    dominant = group.dominant
    n = len(group.members)
    what = f"`{clip(dominant.name, LEAD_NAME_MAX_CHARS)}`" + (f" ({dominant.shape})" if dominant.shape else "")
    scope = f"{n} {noun} op signatures led by {what}" if n > 1 else f"The {noun} op {what}"
    verb = "take" if n > 1 else "takes"
    calls = f"{group.call_count} call{'s' if group.call_count != 1 else ''}"
    where = f" on {group.library} kernels" if group.library != "Unknown" else ""
    if group.comparative:
        t2 = trace2_time_ms(group)
        slower = 100.0 * (group.time_ms - t2) / group.time_ms if group.time_ms > 0 else 0.0
        capped = sum(op.efficiency_capped for op in group.members)
        cap = (f" For {capped} of them trace 1 already runs close to its roofline, so the recoverable time is "
               "capped at the roofline gap." if capped else "")
        if group.slower_trace == 2:
            return (f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms on trace 1 ({group.percent_of_e2e:.2f} % of E2E) "
                    f"and {t2:.3f} ms on trace 2{where}: trace 2 takes {t2 / group.time_ms:.2f}x trace 1's time, "
                    f"{t2 - group.time_ms:.3f} ms that trace 2 loses against trace 1.")
        return (
            f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms on trace 1 ({group.percent_of_e2e:.2f} % of E2E) "
            f"and {t2:.3f} ms on trace 2{where}: trace 1 is {slower:.1f} % slower.{cap}"
        )
    if group.chain_model:
        return (f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms ({group.percent_of_e2e:.2f} % of E2E){where}; "
                f"{group.chain_model}.")
    if group.estimate_method == "quantified":
        return (
            f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms ({group.percent_of_e2e:.2f} % of E2E) "
            f"and run{'' if n > 1 else 's'} at {efficiency_phrase(group)}{where}."
        )
    return (
        f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms ({group.percent_of_e2e:.2f} % of E2E){where}; "
        f"there is no perf model for {'them' if n > 1 else 'it'}, so the distance to the roofline is unknown."
    )


def relabel_sentence(ops: Sequence[OpRecord], noun: str, group_size: int) -> str:
    if not ops:
        return ""
    sources = "`, `".join(sorted({op.relabelled_from or "" for op in ops}))
    reason = f"the kernel taxonomy recognises most of {{}} kernel time as {noun} kernels, so {{}} re-labelled and analyzed here."
    if len(ops) == 1 and group_size == 1:
        return f"The op was labelled `{sources}` by the op categorizer; " + reason.format("its", "it was")
    names = ", ".join(f"`{clip(op.name, TITLE_NAME_MAX_CHARS)}`" for op in ops[:3]) + (" ..." if len(ops) > 3 else "")
    return (f"{len(ops)} of these ops ({names}) were labelled `{sources}` by the op categorizer; "
            + reason.format("their", "they were"))


def comparative_members_table(group: OpGroup) -> str:
    lines = [
        "| Operation | Shape | Count (T1/T2) | Trace 1 (ms) | Trace 2 (ms) | Difference (ms) | Slower side (time ratio) "
        "| % Roofline (T1) | Bound (T1) | Impact mid (% E2E) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for op in group.members:
        match = op.comparison
        t2 = match.time_trace2_ms if match else None
        count2 = f"{match.count_trace2:.0f}" if match else "—"
        efficiency = slower_side(op.time_ms, t2) + (" (impact capped at the roofline)" if op.efficiency_capped else "")
        name = op.name.replace("|", "\\|")
        lines.append(
            f"| `{name}` | {op.args or op.shape or '—'} | {op.count}/{count2} | {op.time_ms:.3f} | "
            f"{fmt(t2, 3)} | {fmt(None if t2 is None else t2 - op.time_ms, 3)} | {efficiency} | "
            f"{fmt(op.roofline_percent, 1)} | {op.bound or '—'} | {fmt(op.impact.mid if op.impact else None, 3)} |"
        )
    return "\n".join(lines)


def members_table(group: OpGroup) -> str:
    if group.comparative:
        return comparative_members_table(group)
    lines = [
        "| Operation | Shape | Count | Time (ms) | % E2E | % Roofline | Bound | Library | Impact mid (% E2E) |",
        "|---|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for op in group.members:
        name = op.name.replace("|", "\\|")
        relabel = f" (re-labelled from {op.relabelled_from})" if op.relabelled_from else ""
        lines.append(
            f"| `{name}`{relabel} | {op.args or op.shape or '—'} | {op.count} | {op.time_ms:.3f} | "
            f"{op.percent_of_e2e:.2f} | {fmt(op.efficiency_percent, 1)} | {op.bound or '—'} | {op.library} | "
            f"{fmt(op.impact.mid if op.impact else None, 3)} |"
        )
    return "\n".join(lines)


def impact_explanation(group: OpGroup, e2e_ms: float, roofline_gpu: str = "this GPU") -> str:
    i = group.impact
    recoverable = i.mid * e2e_ms / 100.0
    if group.comparative and group.slower_trace == 2:
        formula = (
            "trace 2 is the slower side: per member, impact = {0.75, 0.875, 1.0} x (t2 - t1) / E2E(trace 1) x 100, "
            "the time trace 2 loses against trace 1 on this report's E2E scale, summed over the members; it "
            "claims none of trace 1's GPU time"
        )
    elif group.comparative:
        formula = (
            "per member, efficiency = 100 x t2 / t1 (raised to trace 1's roofline value when lower), "
            "gap = 1 - efficiency / 100 and impact = {0.75, 0.875, 1.0} x gap x t1 / E2E(trace 1) x 100, "
            "summed over the members"
        )
    elif group.chain_model:
        formula = f"{group.chain_model}; impact = the chain's time minus that, at the band's low, mid and high"
    elif group.estimate_method == "quantified" and group.bound == "latency":
        formula = (
            f"latency-bound: every member's kernels average at most {settings.LATENCY_BOUND_KERNEL_US:g} µs and their "
            f"work would take under the {settings.KERNEL_TIME_FLOOR_US:g} µs kernel floor at the attainable roofline "
            "share, so tuning removes nothing; fusing them into a neighbouring kernel removes one kernel floor each: "
            f"impact = {{0.75, 0.875, 1.0}} x kernels x {settings.KERNEL_TIME_FLOOR_US:g} µs / E2E x 100 (at most "
            "their time), summed over the members"
        )
    elif group.estimate_method == "quantified":
        attainable = sorted({round(m.attainable_percent, 1) for m in group.members})
        reach = (f"{attainable[0]:g} %" if len(attainable) == 1 else f"{attainable[0]:g}-{attainable[-1]:g} %")
        observed = [m for m in group.members if m.best_observed_trace]
        source = (f"the best observed for the same op on {roofline_gpu} in the warehouse where a member has one, "
                  "else the constant ATTAINABLE_ROOFLINE_PERCENT / the agent's band" if observed else
                  f"what these ops reach on {roofline_gpu}: the constant ATTAINABLE_ROOFLINE_PERCENT / the agent's band")
        formula = (
            f"per member, gap = 1 - efficiency / attainable ({reach} of the roofline: {source}) "
            "and impact = {0.75, 0.875, 1.0} x gap x time / E2E x 100, summed over the members"
        )
    else:
        formula = ("no perf model, a heuristic guess: impact = {0.15, 0.30, 0.45} x the ops' share of E2E "
                   "(not a measured distance to any roofline)")
    return (
        f"- Low: {i.low:.3f} % of E2E, mid: {i.mid:.3f} %, high: {i.high:.3f} % ({group.estimate_method}; {formula}).\n"
        f"- Mid estimate in time: {recoverable:.3f} ms of the {e2e_ms:.3f} ms E2E."
    )


def build_finding(rank: int, group: OpGroup, agent: ComputeAgent, data: AgentData) -> Finding:
    ctx = data.ctx
    advice = agent.advise(group, data)
    title = group_title(group, ctx.platform if ctx.roofline_assumed else None)
    # the agent that owns the rest calls a group of a named category (RoPE_fwd, MoE_aux, ...) by it
    category = group.dominant.op_category
    noun = category if agent.owns_the_rest and category not in ("", "other") else agent.noun
    relabelled = relabel_sentence(group.relabelled, agent.noun, len(group.members))
    insight = " ".join(s for s in (lead_insight(group, noun), relabelled, advice.insight, best_observed_sentence(group)) if s)
    confidence, reasons = finding_confidence(group, ctx)
    modules = next((chain for op in group.members if (chain := [m for m in op.module_chain if m != "root"])), [])
    layer = " > ".join(modules[-3:]) if modules else "outside every nn.Module (or no module information in the trace)"
    identification = (
        f"{lead_insight(group, agent.noun)} Model layer: {layer}. Library (kernel taxonomy): {group.library}. "
        + (f"Group: {group_phrase(group)}, family `{group.family}`."
           if group.estimate_method == "quantified" else
           f"Group: no perf model, grouped by op (`{clip(group.family, TITLE_NAME_MAX_CHARS)}`).")
        + (" " + relabelled if group.relabelled else "")
    )
    details = "\n\n".join([
        f"**Identification:** {identification}",
        "**Data:**\n\n" + members_table(group),
        f"**Reasoning:** {advice.reasoning}",
        f"**Resolution:** {advice.resolution}",
        "**Impact estimate:**\n\n" + impact_explanation(group, ctx.e2e_time_ms, ctx.roofline_gpu)
        + f"\n- Confidence: {confidence} ({'; '.join(reasons)}).",
    ])
    slug = re.sub(r"[^a-z0-9]+", "-", f"{group.bound}-{group.library}-{group.bucket}-{group.family}".lower()).strip("-")
    impact = group.impact
    return Finding(
        finding_id=f"{agent.name}:p{rank}-{slug}"[:120],
        agent=agent.name,
        tier="compute",
        category=agent.name,
        title=title,
        insight=insight,
        action=advice.action,
        impact_low=impact.low,
        impact_score=impact.mid,
        impact_high=impact.high,
        recoverable_ms=impact.mid * ctx.e2e_time_ms / 100.0,
        estimate_method=group.estimate_method,
        confidence=confidence,
        evidence={
            "e2e_time_ms": ctx.e2e_time_ms,
            "platform": ctx.platform,
            "group": {"bound": group.bound, "library": group.library, "efficiency_bucket": group.bucket, "family": group.family},
            "time_ms": group.time_ms,
            "percent_of_e2e": group.percent_of_e2e,
            "call_count": group.call_count,
            "weighted_efficiency_percent": group.weighted_efficiency,
            "confidence_reasons": reasons,
            "members": [
                {
                    "signature_key": op.signature_key, "name": op.name, "op_category": op.op_category,
                    "relabelled_from": op.relabelled_from, "args": op.args, "count": op.count,
                    "time_ms": op.time_ms, "percent_of_e2e": op.percent_of_e2e,
                    "efficiency_percent": op.efficiency_percent, "bound": op.bound, "library": op.library,
                    "flops_per_byte": op.flops_per_byte, "kind": op.kind,
                    "impact_low": op.impact.low if op.impact else None,
                    "impact_mid": op.impact.mid if op.impact else None,
                    "impact_high": op.impact.high if op.impact else None,
                }
                for op in group.members
            ],
        },
        evidence_sql=evidence_sql(group, ctx),
        operations=[f"{op.name} {op.args}".strip() for op in group.members],
        details=details,
    )
