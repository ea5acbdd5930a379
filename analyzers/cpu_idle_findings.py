"""The cpu_idle findings: one per gap class that holds recoverable (or notable) idle time, each
with the gaps it claims and the impact computed from them (see analyzers/cpu_idle.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracelake.analyzers import settings
from tracelake.analyzers.confidence import confidence_from_quality
from tracelake.analyzers.contracts import AnalysisContext, Finding
from tracelake.analyzers.cpu_idle_metrics import (
    GAP_CLASSES_SQL,
    BlockingCall,
    CpuIdleMetrics,
    GapClassStats,
    GapReasonStats,
    HostFrame,
)
from tracelake.core.sql_text import inline_trace_id

AGENT_NAME = "cpu_idle"


@dataclass(frozen=True)
class FindingInputs:
    """What every finding of the agent is written from."""

    metrics: CpuIdleMetrics
    ctx: AnalysisContext
    claims: dict[str, dict[int, float]]  # gap class -> {gap_id: µs above the residual}
    common: dict[str, Any]  # the evidence every finding records
    evidence_sql: str
    data_table: str  # markdown table of the gap classes


def _ladder(recoverable_ms: float, e2e_ms: float, fractions: tuple[float, float, float]) -> tuple[float, float, float]:
    share = 100.0 * recoverable_ms / e2e_ms if e2e_ms > 0 else 0.0
    low, mid, high = (round(share * f, 3) for f in fractions)
    return low, mid, high


def _gap_table(metrics: CpuIdleMetrics) -> str:
    lines = ["| Gap class | Gaps | Idle (ms) | % of E2E | Recoverable (ms) | Median gap (us) | Median launch lead (us) |",
             "|---|---|---|---|---|---|---|"]
    for name, stats in metrics.gaps_by_class.items():
        if stats.gap_count == 0:
            continue
        # window-edge idle is outside the analysis window E2E is measured over
        share = "outside E2E" if name == "window_edge" and metrics.window_edge_excluded else f"{stats.idle_percent_of_e2e:.1f}"
        lines.append(f"| {name} | {stats.gap_count} | {stats.idle_time_ms:.3f} | {share} | "
                     f"{stats.recoverable_time_ms:.3f} | {stats.median_gap_us or 0:.1f} | "
                     f"{stats.median_launch_lead_us or 0:.1f} |")
    return "\n".join(lines)


def _finding(slug: str, **fields: Any) -> Finding:
    return Finding(finding_id=f"{AGENT_NAME}:{slug}", agent=AGENT_NAME, tier="system", category=AGENT_NAME, **fields)


def _claimed_ms(claimed: dict[int, float]) -> float:
    """The GPU time (ms) a finding's impact is computed from: the sum of its claims."""
    return sum(claimed.values()) / 1000.0


def _quantified(ctx: AnalysisContext, claimed_gaps: dict[int, float],
                fractions: tuple[float, float, float]) -> dict[str, Any]:
    """The impact ladder over the claimed gap time (the part of each gap above the residual)."""
    low, mid, high = _ladder(_claimed_ms(claimed_gaps), ctx.e2e_time_ms, fractions)
    return {"impact_low": low, "impact_score": mid, "impact_high": high,
            "recoverable_ms": round(mid * ctx.e2e_time_ms / 100.0, 4), "estimate_method": "heuristic",
            "claimed_gaps": claimed_gaps}


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _us_or_ms(us: float | None) -> str:
    value = us or 0.0
    return f"{value / 1000:.2f} ms" if abs(value) >= 1000 else f"{value:.1f} us"


def _launch_evidence(stats: GapClassStats) -> str:
    """The sentence that says when the kernel closing the class's gaps was launched."""
    delay = stats.median_launch_delay_us or 0.0
    when = (f"{_us_or_ms(delay)} after the GPU went idle" if delay >= 0
            else f"{_us_or_ms(-delay)} before the GPU went idle")
    return (f"the kernel closing each gap was launched a median {when} and started "
            f"{_us_or_ms(stats.median_launch_lead_us)} after its launch")


def _calls_text(calls: list[BlockingCall], limit: int = 4) -> str:
    return ", ".join(f"`{c.name}` ({c.gap_count})" for c in calls[:limit])


def _frames_text(frames: list[HostFrame], side: str, limit: int = 3) -> str:
    chosen = [f for f in frames if f.side == side][:limit]
    return ", ".join(f"`{f.name}` ({f.gap_time_ms:.2f} ms)" for f in chosen)


def idle_findings(m: CpuIdleMetrics, ctx: AnalysisContext, claims: dict[str, dict[int, float]]) -> list[Finding]:
    evidence_sql = inline_trace_id(GAP_CLASSES_SQL, ctx.trace_id)
    common = {
        "idle_time_ms": m.idle_time_ms, "idle_time_percent": m.idle_time_percent,
        "total_time_ms": m.total_time_ms, "busy_time_percent": m.busy_time_percent, "kernel_count": m.kernel_count,
        "short_kernel_share": m.short_kernel_share, "median_kernel_us": m.median_kernel_us,
        "median_gap_us": m.median_gap_us,
    }
    inputs = FindingInputs(m, ctx, claims, common, evidence_sql, _gap_table(m))
    findings = [f for f in (_launch_bound(inputs), _host_work(inputs), _sync_blocked(inputs),
                            _queued_waiting(inputs), _window_edge(inputs)) if f is not None]
    return findings or [_unattributed(inputs)]


def _fractions_text(fractions: tuple[float, float, float]) -> str:
    return "/".join(f"{f:.2f}" for f in fractions)


def _launch_bound(inputs: FindingInputs) -> Finding | None:
    m, ctx, claims = inputs.metrics, inputs.ctx, inputs.claims
    common, evidence_sql, data_table = inputs.common, inputs.evidence_sql, inputs.data_table
    launch = m.gaps_by_class["launch_bound"]
    impact = _quantified(ctx, claims["launch_bound"], settings.IDLE_RECOVERY_FRACTIONS)
    if not launch.gap_count or impact["impact_score"] < settings.MIN_PITEM_IMPACT_SCORE:
        return None
    many_short = (m.short_kernel_share or 0.0) >= settings.SHORT_KERNEL_SHARE_MIN
    slow_host = (launch.median_gap_us or 0.0) > settings.LAUNCH_BOUND_MEDIAN_GAP_US
    launch_bound = many_short and slow_host
    slug = "launch-bound" if launch_bound else "host-overhead"
    if _replays_graphs(ctx):
        title = ("Launch-bound: the eager kernels around the GPU-graph replay wait for their launches" if launch_bound
                 else "Host-bound: the kernels launched outside the GPU-graph replay start after the GPU runs dry")
    else:
        title = ("Launch-bound: the GPU waits for each kernel launch; run the step as a GPU graph" if launch_bound
                 else "Host-bound: kernels are launched after the GPU runs dry; run the step as a GPU graph")
    confidence = confidence_from_quality("high" if launch_bound else "medium", ctx.quality_verdicts,
                                         ("linked_gpu_time_share", "same_stream_overlaps", "graph_replay"))
    drained = sum(c.gap_count for c in m.drained_by_calls)
    drained_text = (
        f" {'One of these gaps opens' if drained == 1 else f'{drained} of these gaps open'} as the host returns "
        f"from a synchronizing call "
        f"({_calls_text(m.drained_by_calls)}, a median {_us_or_ms(m.drained_by_calls[0].median_return_after_gap_start_us)} "
        f"after the gap began): the call ended inside the gap, so it is not what the GPU waited for; the host's "
        f"relaunch after it is." if drained else "")
    insight = (
        f"The GPU is idle {m.idle_time_percent:.1f} % of the {m.total_time_ms:.2f} ms timeline; "
        f"{launch.idle_time_ms:.2f} ms of it ({launch.idle_percent_of_e2e:.1f} % of E2E) sits in {launch.gap_count} "
        f"short gaps (median {launch.median_gap_us or 0:.1f} us) in which {_launch_evidence(launch)}, while "
        f"{m.short_kernel_count} of {m.kernel_count} kernels run under {settings.SHORT_KERNEL_US:g} us "
        f"(median {m.median_kernel_us or 0:.1f} us).{drained_text}"
    )
    action = _graph_action(ctx)
    details = (
        f"**Identification:** in {launch.gap_count} gaps the kernel that ends the gap was launched late: "
        f"{_launch_evidence(launch)} (class `launch_bound` of `gpu_idle_gaps`; source: `cpu_idle_metrics.json` -> "
        f"`gaps_by_class.launch_bound`, `short_kernel_share`).{drained_text}\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** each kernel started as soon as it was launched, and it was launched after the "
        f"previous one had finished: GPU time is bounded by the host's launch rate, not by kernel speed. "
        f"{100 * (m.short_kernel_share or 0):.0f} % of kernels are shorter than a typical host launch (5-20 us).\n\n"
        f"**Resolution:** a GPU graph records the kernel sequence once and replays it with a single host call, "
        f"which removes the per-kernel host cost from the critical path. Where capture is not possible, "
        f"compiling the step (fewer, fused kernels) or a larger batch per launch shrinks the same gaps.\n\n"
        f"**Impact estimate:** recoverable = {_fractions_text(settings.IDLE_RECOVERY_FRACTIONS)} (low/mid/high) x the "
        f"launch-bound gap time above {settings.RESIDUAL_GAP_US:g} us per gap ({launch.recoverable_time_ms:.3f} ms) = "
        f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E (mid {impact['impact_score']:.1f} %, "
        f"about {impact['recoverable_ms']:.3f} ms)."
    )
    return _finding(
        slug, title=title, insight=insight, action=action, confidence=confidence,
        evidence={**common, "impact_basis_ms": _claimed_ms(claims["launch_bound"]), "gap_class": "launch_bound",
                  "launch_gap_count": launch.gap_count, "launch_idle_ms": launch.idle_time_ms,
                  "launch_recoverable_ms": launch.recoverable_time_ms,
                  "median_launch_delay_us": launch.median_launch_delay_us,
                  "median_launch_lead_us": launch.median_launch_lead_us,
                  "drained_by_calls": [c.model_dump() for c in m.drained_by_calls],
                  "residual_gap_us": settings.RESIDUAL_GAP_US, "recovery_fractions": list(settings.IDLE_RECOVERY_FRACTIONS)},
        evidence_sql=evidence_sql, details=details, **impact)


def _host_work(inputs: FindingInputs) -> Finding | None:
    m, ctx, claims = inputs.metrics, inputs.ctx, inputs.claims
    common, evidence_sql, data_table = inputs.common, inputs.evidence_sql, inputs.data_table
    work = m.gaps_by_class["host_work"]
    if not work.gap_count:
        return None
    creditable = not m.gpu_share_tiny and work.host_evidence_gap_count > 0
    impact = _quantified(ctx, claims["host_work"], settings.BUBBLE_RECOVERY_FRACTIONS) if creditable else None
    if impact is not None and impact["impact_score"] < settings.MIN_PITEM_IMPACT_SCORE:
        return None
    if impact is None and work.idle_percent_of_e2e < settings.QUEUED_WAITING_PERCENT_MIN:
        return None
    at_start = _frames_text(m.host_frames, "gap start")
    at_end = _frames_text(m.host_frames, "gap end")
    loading = [f for f in m.host_frames if f.side == "gap start" and f.is_data_loading]
    loading_ms = sum(f.gap_time_ms for f in loading)
    frames_text = (
        (f" When the GPU went idle the host was loading the next batch in {at_start}" if loading else
         f" When the GPU went idle the host was in {at_start}" if at_start else
         " No python frame or cpu op of the launching thread was recorded when the GPU went idle")
        + (f"; when it launched again, in {at_end}." if at_end else "."))
    confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share", "same_stream_overlaps"))
    insight = (
        f"{_plural(work.gap_count, 'gap')} of {_us_or_ms(work.min_gap_us)} or more leave the GPU idle for "
        f"{work.idle_time_ms:.2f} ms ({work.idle_percent_of_e2e:.1f} % of E2E; longest {_us_or_ms(work.max_gap_us)}): "
        f"{_launch_evidence(work)}, so the GPU waited for the host, which was busy elsewhere.{frames_text}"
    )
    if m.gpu_share_tiny:
        why_not = (f" The GPU is busy only {m.busy_time_percent:.2f} % of the timeline: this looks like a "
                   f"micro-benchmark or test harness, whose host time is not a workload's to recover.")
    elif not creditable:
        why_not = " The trace records no host frames for these gaps, so what the host did is not known."
    else:
        why_not = ""
    if ctx.facts.serving_engine_op_count or ctx.facts.serving_engine:
        # inside a serving step there is no input pipeline to move: the host stalls in the forward
        graphs = (f"{ctx.facts.serving_engine}'s GPU-graph mode (or CUDA / HIP graphs)" if ctx.facts.serving_engine_graph_mode
                  else "CUDA / HIP graphs")
        action = (f"Take the host out of the step: the named frames stall inside the forward pass, which {graphs} "
                  "removes; if they remain, look for CPU contention or a synchronizing call in those frames.")
        resolution = (f"run the step so the host does not launch each kernel ({graphs}), so the next GPU phase is "
                      "queued before the current one ends")
    elif loading:
        action = (f"The input pipeline holds the GPU ({loading_ms:.2f} ms of these gaps open in a DataLoader "
                  "fetch): load batches in background DataLoader workers (num_workers > 0, persistent_workers, a "
                  "larger prefetch_factor) with pin_memory, and move per-sample work (decoding, augmentation, "
                  "collation) into those workers or onto the GPU.")
        resolution = ("load the next batch in background DataLoader workers so it is ready before the current GPU "
                      "phase ends")
    else:
        action = ("Move the host work named above off the critical path: prepare the next step's inputs on a "
                  "background worker (DataLoader workers, pinned-memory prefetch), or overlap it with the GPU work "
                  "of the current step.")
        resolution = ("move the host work off the critical path (background data loading, pinned-memory prefetch, "
                      "asynchronous scheduling) so the next GPU phase is queued before the current one ends")
    impact_text = (
        f"recoverable = {_fractions_text(settings.BUBBLE_RECOVERY_FRACTIONS)} (low/mid/high) x the host-work gap "
        f"time above {settings.RESIDUAL_GAP_US:g} us per gap, over the gaps with host frames "
        f"({work.recoverable_time_ms:.3f} ms) = {impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E."
        if impact else f"not credited.{why_not}")
    details = (
        f"**Identification:** long idle gaps whose closing kernel was launched late (class `host_work` of "
        f"`gpu_idle_gaps`): {_launch_evidence(work)}.{frames_text} (source: `cpu_idle_metrics.json` -> "
        f"`gaps_by_class.host_work`, `host_frames`).\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** a gap this long is far longer than any launch latency: the host was not "
        f"launching at all, it was running the code above. Only part of such work can move off the critical path, "
        f"which is why a smaller share is credited.{why_not}\n\n"
        f"**Resolution:** {resolution}.\n\n"
        f"**Impact estimate:** {impact_text}"
    )
    fields = {**impact} if impact else {"estimate_method": "qualitative"}
    return _finding(
        "host-work", title="Host work between GPU phases leaves the GPU idle", insight=insight + why_not,
        action=action, confidence=confidence,
        evidence={**common, "impact_basis_ms": _claimed_ms(claims["host_work"]) if impact else 0.0,
                  "gap_class": "host_work", "host_work_gap_count": work.gap_count, "host_work_idle_ms": work.idle_time_ms,
                  "host_work_recoverable_ms": work.recoverable_time_ms, "gpu_share_tiny": m.gpu_share_tiny,
                  "host_frames": [f.model_dump() for f in m.host_frames[:6]],
                  "recovery_fractions": list(settings.BUBBLE_RECOVERY_FRACTIONS)},
        evidence_sql=evidence_sql, details=details, **fields)


def _sync_blocked(inputs: FindingInputs) -> Finding | None:
    m, ctx, claims = inputs.metrics, inputs.ctx, inputs.claims
    common, evidence_sql, data_table = inputs.common, inputs.evidence_sql, inputs.data_table
    sync = m.gaps_by_class["sync_blocked"]
    impact = _quantified(ctx, claims["sync_blocked"], settings.IDLE_RECOVERY_FRACTIONS)
    if not sync.gap_count or impact["impact_score"] < settings.MIN_PITEM_IMPACT_SCORE:
        return None
    calls = _calls_text(m.blocking_calls) or "a synchronizing call"
    confidence = confidence_from_quality("high", ctx.quality_verdicts, ("linked_gpu_time_share", "same_stream_overlaps"))
    insight = (
        f"In {_plural(sync.gap_count, 'idle gap')} totalling {sync.idle_time_ms:.2f} ms ({sync.idle_percent_of_e2e:.1f} % "
        f"of E2E) the launching thread sat in a synchronizing call for the whole gap ({calls}), and that call issued the "
        f"GPU op that ends the gap: the GPU waited for the call."
    )
    action = ("Make the call asynchronous: copy from pinned memory with `non_blocking=True` (or keep the value on the "
              "device) so the host never blocks while the GPU has nothing queued.")
    details = (
        f"**Identification:** class `sync_blocked` of `gpu_idle_gaps`: a call of the dbt var "
        f"`synchronizing_runtime_calls` spans the gap (it began before the GPU went idle and returned at or after "
        f"the next GPU op started) and issued that op itself (source: `cpu_idle_metrics.json` -> "
        f"`gaps_by_class.sync_blocked`, `blocking_calls`).\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** a blocking copy from pageable memory (or a copy behind a synchronize) holds the "
        f"host until it is done, and the GPU has nothing else queued meanwhile (median gap "
        f"{sync.median_gap_us or 0:.1f} us, largest {sync.max_gap_us or 0:.1f} us here).\n\n"
        f"**Resolution:** pinned host buffers and `non_blocking` copies let the host keep launching while the "
        f"copy runs.\n\n"
        f"**Impact estimate:** recoverable = {_fractions_text(settings.IDLE_RECOVERY_FRACTIONS)} (low/mid/high) x the "
        f"sync-blocked gap time above {settings.RESIDUAL_GAP_US:g} us per gap ({sync.recoverable_time_ms:.3f} ms) = "
        f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E."
    )
    return _finding(
        "sync-blocked", title="Host blocked in a synchronizing call while the GPU idles", insight=insight,
        action=action, confidence=confidence,
        evidence={**common, "impact_basis_ms": _claimed_ms(claims["sync_blocked"]), "gap_class": "sync_blocked",
                  "sync_gap_count": sync.gap_count, "sync_idle_ms": sync.idle_time_ms,
                  "sync_recoverable_ms": sync.recoverable_time_ms,
                  "blocking_calls": [c.model_dump() for c in m.blocking_calls]},
        evidence_sql=evidence_sql, details=details, **impact)


REASON_TEXT = {
    "inside_graph_replay": "between kernels of GPU graph replays",
    "waits_on_collective": "next to a collective (waiting on the other ranks)",
    "waits_on_other_stream": "where the GPU switches streams (an event or stream dependency)",
    "queued_ahead": "on one stream with the kernel already queued (an event wait or the kernel's own start-up)",
}
# what to look at for each reason, said only for the reasons the trace's gaps have
REASON_REMEDY = {
    "inside_graph_replay": ("inside the graph replays the kernels are already queued back to back, so only fewer, "
                            "larger kernels in the captured graph (fusion) shorten these gaps"),
    "waits_on_collective": "overlap the collective with computation so the other ranks' arrival is hidden",
    "waits_on_other_stream": "record the other stream's events earlier, or overlap that stream's work with computation",
    "queued_ahead": ("check the event waits on the stream and the kernels' own start-up (large launch "
                     "configurations, lazy module loading)"),
}


def queued_remedies(reasons: list[GapReasonStats]) -> str:
    """The remedies of the reasons the queued gaps have, largest idle time first."""
    ordered = sorted(reasons, key=lambda r: -r.idle_time_ms)
    return "; ".join(dict.fromkeys(REASON_REMEDY[r.reason] for r in ordered if r.reason in REASON_REMEDY))


def _queued_waiting(inputs: FindingInputs) -> Finding | None:
    m, ctx, common, evidence_sql, data_table = inputs.metrics, inputs.ctx, inputs.common, inputs.evidence_sql, inputs.data_table
    queued = m.gaps_by_class["queued_waiting"]
    if not queued.gap_count or queued.idle_percent_of_e2e < settings.QUEUED_WAITING_PERCENT_MIN:
        return None
    reasons = [r for r in m.gaps_by_reason if r.gap_class == "queued_waiting"]
    reasons_text = "; ".join(f"{r.idle_time_ms:.2f} ms in {_plural(r.gap_count, 'gap')} {REASON_TEXT[r.reason]}"
                             for r in reasons[:4])
    confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share", "same_stream_overlaps"))
    insight = (
        f"{queued.idle_time_ms:.2f} ms of idle time ({queued.idle_percent_of_e2e:.1f} % of E2E) is in "
        f"{_plural(queued.gap_count, 'gap')} whose next kernel had been launched a median "
        f"{_us_or_ms(queued.median_launch_lead_us)} before the gap ended: the work was queued and the GPU waited on "
        f"something else, not on the host ({reasons_text})."
    )
    remedies = queued_remedies(reasons)
    action = (f"Look at what the queued work depends on: {remedies}. Host-side changes (graphs, fewer launches) "
              "do not recover this time.")
    details = (
        f"**Identification:** class `queued_waiting` of `gpu_idle_gaps`: the kernel that ends each gap waited longer "
        f"after its launch than a launch takes and longer than the host took to issue it (source: "
        f"`cpu_idle_metrics.json` -> `gaps_by_class.queued_waiting`, `gaps_by_reason`).\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** the host was ahead of the GPU; the GPU was held by a dependency "
        f"({reasons_text}).\n\n"
        f"**Resolution:** shorten or overlap the dependency: {remedies}.\n\n"
        f"**Impact estimate:** not quantified: the trace shows that the GPU waited, not how much of the wait "
        f"a reordering would remove. No idle gap is claimed."
    )
    return _finding(
        "queued-waiting", title="Queued work waiting on a dependency leaves the GPU idle", insight=insight,
        action=action, confidence=confidence, estimate_method="qualitative",
        evidence={**common, "gap_class": "queued_waiting", "queued_gap_count": queued.gap_count,
                  "queued_idle_ms": queued.idle_time_ms, "median_launch_lead_us": queued.median_launch_lead_us,
                  "reasons": [r.model_dump() for r in reasons]},
        evidence_sql=evidence_sql, details=details)


def _window_edge(inputs: FindingInputs) -> Finding | None:
    m, ctx, common, evidence_sql, data_table = inputs.metrics, inputs.ctx, inputs.common, inputs.evidence_sql, inputs.data_table
    edge = m.gaps_by_class["window_edge"]
    if not (edge.gap_count and m.idle_time_ms and edge.idle_time_ms >= settings.WINDOW_EDGE_IDLE_SHARE_MIN * m.idle_time_ms):
        return None
    confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share",))
    insight = (
        f"{edge.idle_time_ms:.2f} ms of the {m.idle_time_ms:.2f} ms idle time "
        f"({100.0 * edge.idle_time_ms / m.total_time_ms:.1f} % of "
        f"the measured {m.total_time_ms:.2f} ms timeline) is in {_plural(edge.gap_count, 'gap')} at the start or end "
        f"of the profile window, outside the steady-state GPU work; nothing is claimed for it, and the report's "
        f"impacts are % of the {ctx.e2e_time_ms:.2f} ms analysis window without it."
    )
    action = ("Re-capture the profile over steady-state iterations only (a profiler schedule with warm-up "
              "steps) so the idle share measures the workload, not the capture window.")
    details = (
        f"**Identification:** the first or last gap of the GPU timeline is {_us_or_ms(edge.max_gap_us)} "
        f"long (class `window_edge` of `gpu_idle_gaps`), which usually means the profiler window opened (or closed) "
        f"well before (after) the measured work, or a stray kernel ran during set-up (source: "
        f"`cpu_idle_metrics.json` -> `gaps_by_class.window_edge`).\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** this gap inflates the E2E denominator and the idle share, but it is not "
        f"part of a repeated step, so no change to the model recovers it.\n\n"
        f"**Resolution:** profile a window that starts and ends on step boundaries; the remaining gap classes "
        f"above are the ones to act on.\n\n"
        f"**Impact estimate:** not quantifiable from trace data: the gap is outside the steady state."
    )
    return _finding(
        "profile-window", title="Idle time dominated by a gap at the profile window edge", insight=insight,
        action=action, confidence=confidence, estimate_method="qualitative",
        evidence={**common, "gap_class": "window_edge", "edge_idle_ms": edge.idle_time_ms,
                  "edge_max_gap_us": edge.max_gap_us},
        evidence_sql=evidence_sql, details=details)


def _unattributed(inputs: FindingInputs) -> Finding:
    m, ctx, common, evidence_sql, data_table = inputs.metrics, inputs.ctx, inputs.common, inputs.evidence_sql, inputs.data_table
    confidence = confidence_from_quality("low", ctx.quality_verdicts, ("linked_gpu_time_share",))
    return _finding(
        "idle-unattributed", title="GPU idle time spread over many tiny gaps",
        insight=(f"The GPU is idle {m.idle_time_percent:.1f} % of the {m.total_time_ms:.2f} ms timeline, but no gap "
                 f"class holds a recoverable share: the median gap is {m.median_gap_us or 0:.1f} us across "
                 f"{m.gap_count} gaps."),
        action="Give each kernel more work (a larger batch per step) so fixed per-kernel gaps weigh less.",
        confidence=confidence, estimate_method="qualitative",
        evidence={**common}, evidence_sql=evidence_sql,
        details=(f"**Identification:** idle above {settings.IDLE_PERCENT_MAX:g} % with no dominant gap class "
                 f"(source: `cpu_idle_metrics.json` -> `gaps_by_class`).\n\n**Data:**\n\n{data_table}\n\n"
                 f"**Reasoning for Slowdown:** gaps close to the {settings.RESIDUAL_GAP_US:g} us a full queue leaves are "
                 f"not a host problem; short kernels make them weigh more.\n\n"
                 f"**Resolution:** more work per kernel amortizes the fixed gap.\n\n"
                 f"**Impact estimate:** not quantifiable from trace data."))


def _replays_graphs(ctx: AnalysisContext) -> bool:
    """The step already replays GPU graphs (trace_quality graph_replay: info when the capture merge
    mapped every replayed kernel, warn otherwise)."""
    return ctx.quality_verdicts.get("graph_replay") in ("info", "warn")


def _graph_action(ctx: AnalysisContext) -> str:
    """GPU-graph advice in the words of what runs the step: a serving engine's graph mode, or
    CUDA / HIP graphs (through torch.compile only where the model is not compiled already). A step
    that already replays a graph is told about the kernels left outside it."""
    if _replays_graphs(ctx):
        return ("The step already replays a GPU graph; these gaps are between the kernels launched outside it (input "
                "preparation before the replay, sampling after it, launched one by one): capture them in the graph too "
                "(the engine's full-graph mode) or overlap their host work with the replay.")
    if ctx.facts.serving_engine_graph_mode:
        # only the engine the trace names: a kernel library's op (aiter, sgl_kernel) names none
        return (f"Run the step in {ctx.facts.serving_engine}'s GPU-graph mode ({ctx.facts.serving_engine_graph_mode}; "
                f"the trace shows {ctx.facts.serving_engine} in `{ctx.facts.serving_engine_evidence}`) so kernels are "
                "replayed back to back without one host launch per kernel.")
    how = ("`torch.cuda.graphs` / `torch.cuda.make_graphed_callables`" if ctx.facts.is_compiled else
           "`torch.cuda.graphs`, or torch.compile mode=\"reduce-overhead\"")
    return (f"Capture the steady-state step in a GPU graph (CUDA / HIP graphs: {how}) so kernels are replayed back "
            "to back without one host launch per kernel.")
