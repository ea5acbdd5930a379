"""CPU / idle analyzer (system tier): why the GPU sits idle, and how much of that is recoverable.

TraceLens only reports the idle share (flagged above 15 %) and never quantifies it. Here every
gap between consecutive GPU busy intervals (a row of the `gpu_idle_gaps` mart) is classified:

- `host_sync`: the host thread that launches the next kernel was blocked in a synchronizing call
  when the GPU ran dry (its innermost runtime call spanning the gap start is a device/stream/event
  synchronize or a blocking copy, or its innermost cpu op is `aten::item` /
  `aten::_local_scalar_dense`) and the call returned inside the gap: the host waited for the queue
  to drain and then had to refill it;
- `window_edge`: a long gap at the very start or end of the profile, outside the steady state;
- `pipeline_bubble`: any other gap of settings.LONG_GAP_US or more (the host was busy elsewhere);
- `graph`: a gap between two kernels of GPU graph replays (no host launch in between);
- `launch`: every other gap: the host could not launch kernels as fast as the GPU ran them.

The recoverable time of a class is the time its gaps exceed settings.RESIDUAL_GAP_US, scaled by a
low / mid / high recovery fraction (estimate_method "heuristic"). A finding claims those gaps
(`claimed_gaps`: gap_id -> the µs above the residual), and its impact is computed from their sum.
"""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from analyzers import settings
from analyzers.common import (
    NO_GPU_TIMELINE, confidence_from_quality, gpu_timeline_row, inline_trace_id, no_data_result, query_rows,
)
from analyzers.contracts import AgentResult, AnalysisContext, Confidence, Finding

AGENT_NAME = "cpu_idle"
TIER = "system"


GAP_CLASSES = ("launch", "host_sync", "pipeline_bubble", "window_edge", "graph")
BLOCKING_RUNTIME_CALLS = ("cudaMemcpy", "hipMemcpy", "hipMemcpyWithStream", "cudaMemcpy2D", "hipMemcpy2D",
                          "hipMemcpyDtoH", "hipMemcpyHtoD", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2")
BLOCKING_CPU_OPS = ("aten::item", "aten::_local_scalar_dense")


class GapClassStats(BaseModel):
    gap_count: int = 0
    idle_time_ms: float = 0.0
    idle_percent_of_e2e: float = 0.0
    recoverable_time_ms: float = 0.0  # sum over the class's gaps of max(0, gap - settings.RESIDUAL_GAP_US)
    median_gap_us: float | None = None
    max_gap_us: float | None = None


class BlockingCall(BaseModel):
    name: str
    gap_count: int  # host-sync gaps this call was blocking at
    gap_time_ms: float


class CpuIdleMetrics(BaseModel):
    idle_flagged: bool
    idle_threshold_percent: float
    total_time_ms: float
    busy_time_ms: float
    idle_time_ms: float
    idle_time_percent: float
    computation_time_percent: float
    exposed_comm_time_percent: float
    exposed_memcpy_time_percent: float
    kernel_count: int
    short_kernel_count: int
    short_kernel_share: float | None
    short_kernel_threshold_us: float
    median_kernel_us: float | None
    mean_kernel_us: float | None
    gap_count: int
    median_gap_us: float | None
    p90_gap_us: float | None
    max_gap_us: float | None
    gaps_by_class: dict[str, GapClassStats]
    blocking_calls: list[BlockingCall]
    graph_launched_kernel_share: float | None
    patterns_detected: list[str]
    dominant_pattern: str | None


# ---- SQL --------------------------------------------------------------------------------------
# Each query takes the trace id once, through `params`, so that evidence_sql is the same text
# with the id inlined.

_GAPS_CTE = f"""
with params as (select ?::varchar as trace_id),
gaps as (
    select gpu_idle_gaps.*, count(*) over () as gap_total
    from gpu_idle_gaps, params
    where gpu_idle_gaps.trace_id = params.trace_id
),
blocked_gaps as (
    select *,
        coalesce(start_runtime_end_us <= end_us
                 and (start_runtime_name ilike '%synchronize%'
                      or start_runtime_name in ({", ".join(f"'{n}'" for n in BLOCKING_RUNTIME_CALLS)})), false)
            as runtime_call_blocks,
        coalesce(start_cpu_op_end_us <= end_us
                 and start_cpu_op_name in ({", ".join(f"'{n}'" for n in BLOCKING_CPU_OPS)}), false) as cpu_op_blocks
    from gaps
),
classified_gaps as (
    select
        gap_id,
        start_us as gap_start_us,
        end_us as gap_end_us,
        duration_us as gap_us,
        greatest(duration_us - {settings.RESIDUAL_GAP_US}, 0) as recoverable_us,
        runtime_call_blocks,
        cpu_op_blocks,
        start_runtime_name,
        start_cpu_op_name,
        case
            when is_inside_graph_replay then 'graph'
            when runtime_call_blocks or cpu_op_blocks then 'host_sync'
            when duration_us >= {settings.LONG_GAP_US} and gap_id in (1, gap_total) then 'window_edge'
            when duration_us >= {settings.LONG_GAP_US} then 'pipeline_bubble'
            else 'launch'
        end as gap_class
    from blocked_gaps
)"""

GAP_CLASSES_SQL = _GAPS_CTE + """
select
    gap_class,
    count(*) as gap_count,
    sum(gap_us) / 1000 as idle_time_ms,
    sum(recoverable_us) / 1000 as recoverable_time_ms,
    median(gap_us) as median_gap_us,
    max(gap_us) as max_gap_us
from classified_gaps
group by gap_class
order by idle_time_ms desc"""

GAP_SUMMARY_SQL = _GAPS_CTE + """
select
    count(*) as gap_count,
    median(gap_us) as median_gap_us,
    quantile_cont(gap_us, 0.9) as p90_gap_us,
    max(gap_us) as max_gap_us,
    sum(gap_us) / 1000 as idle_time_ms
from classified_gaps"""

# The call the host thread was blocked in when the gap opened: the innermost runtime call, and the
# innermost cpu op (a GPU scalar read), when they block.
BLOCKING_CALLS_SQL = _GAPS_CTE + """,
blocking_calls as (
    select gap_id, gap_us, start_runtime_name as name from classified_gaps
    where gap_class = 'host_sync' and runtime_call_blocks
    union all
    select gap_id, gap_us, start_cpu_op_name as name from classified_gaps
    where gap_class = 'host_sync' and cpu_op_blocks
)
select name, count(*) as gap_count, sum(gap_us) / 1000 as gap_time_ms
from blocking_calls
group by name
order by gap_time_ms desc, name"""

# The gaps a finding of a class rests on, with the part of each it counts (the time above
# settings.RESIDUAL_GAP_US): the finding's claimed_gaps.
CLAIMED_GAPS_SQL = _GAPS_CTE + """
select gap_class, gap_id, recoverable_us
from classified_gaps
where recoverable_us > 0
order by gap_class, gap_id"""

KERNEL_STATS_SQL = f"""
with params as (select ?::varchar as trace_id)
select
    count(*) as kernel_count,
    count(*) filter (where dur_us < {settings.SHORT_KERNEL_US}) as short_kernel_count,
    median(dur_us) as median_kernel_us,
    avg(dur_us) as mean_kernel_us,
    avg(is_graph_launch::int) as graph_launched_kernel_share
from kernels, params
where kernels.trace_id = params.trace_id and kernels.is_linked and kernels.category = 'kernel'"""

TIMELINE_SQL = """
with params as (select ?::varchar as trace_id)
select total_time_ms, busy_time_ms, idle_time_ms, idle_time_percent, computation_time_percent,
    exposed_comm_time_percent, exposed_memcpy_time_percent
from gpu_timeline, params
where gpu_timeline.trace_id = params.trace_id"""






def _claimed_gaps(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, dict[int, float]]:
    """gap class -> {gap_id: the µs of the gap above settings.RESIDUAL_GAP_US} (the class's claims)."""
    claims: dict[str, dict[int, float]] = {name: {} for name in GAP_CLASSES}
    for gap_class, gap_id, recoverable_us in db.execute(CLAIMED_GAPS_SQL, [trace_id]).fetchall():
        claims[gap_class][int(gap_id)] = float(recoverable_us)
    return claims


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def _ladder(recoverable_ms: float, e2e_ms: float, fractions: tuple[float, float, float]) -> tuple[float, float, float]:
    share = 100.0 * recoverable_ms / e2e_ms if e2e_ms > 0 else 0.0
    low, mid, high = (round(share * f, 3) for f in fractions)
    return low, mid, high


def _gap_table(metrics: CpuIdleMetrics) -> str:
    lines = ["| Gap class | Gaps | Idle (ms) | % of E2E | Recoverable (ms) | Median gap (us) | Max gap (us) |",
             "|---|---|---|---|---|---|---|"]
    for name, stats in metrics.gaps_by_class.items():
        if stats.gap_count == 0:
            continue
        lines.append(f"| {name} | {stats.gap_count} | {stats.idle_time_ms:.3f} | {stats.idle_percent_of_e2e:.1f} | "
                     f"{stats.recoverable_time_ms:.3f} | {stats.median_gap_us or 0:.1f} | {stats.max_gap_us or 0:.1f} |")
    return "\n".join(lines)



def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Idle time of one trace: how much, in which kind of gaps, and what would recover it."""
    tl = gpu_timeline_row(db, TIMELINE_SQL, ctx.trace_id)
    if tl is None:
        return no_data_result(AGENT_NAME, "system", NO_GPU_TIMELINE)
    e2e_ms = float(tl["total_time_ms"])
    kernel_stats = query_rows(db, KERNEL_STATS_SQL, [ctx.trace_id])[0]
    summary = query_rows(db, GAP_SUMMARY_SQL, [ctx.trace_id])[0]
    classes = {r["gap_class"]: r for r in query_rows(db, GAP_CLASSES_SQL, [ctx.trace_id])}
    blocking = query_rows(db, BLOCKING_CALLS_SQL, [ctx.trace_id])
    claims = _claimed_gaps(db, ctx.trace_id)

    gaps_by_class = {}
    for name in GAP_CLASSES:
        row = classes.get(name)
        gaps_by_class[name] = GapClassStats() if row is None else GapClassStats(
            gap_count=int(row["gap_count"]),
            idle_time_ms=_round(row["idle_time_ms"], 4),
            idle_percent_of_e2e=_round(100.0 * row["idle_time_ms"] / e2e_ms, 3),
            recoverable_time_ms=_round(row["recoverable_time_ms"], 4),
            median_gap_us=_round(row["median_gap_us"]),
            max_gap_us=_round(row["max_gap_us"]),
        )
    kernel_count = int(kernel_stats["kernel_count"] or 0)
    short_count = int(kernel_stats["short_kernel_count"] or 0)
    idle_percent = float(tl["idle_time_percent"] or 0.0)
    metrics = CpuIdleMetrics(
        idle_flagged=idle_percent > settings.IDLE_PERCENT_MAX,
        idle_threshold_percent=settings.IDLE_PERCENT_MAX,
        total_time_ms=_round(e2e_ms, 4),
        busy_time_ms=_round(tl["busy_time_ms"], 4),
        idle_time_ms=_round(tl["idle_time_ms"], 4),
        idle_time_percent=_round(idle_percent),
        computation_time_percent=_round(tl["computation_time_percent"] or 0.0),
        exposed_comm_time_percent=_round(tl["exposed_comm_time_percent"] or 0.0),
        exposed_memcpy_time_percent=_round(tl["exposed_memcpy_time_percent"] or 0.0),
        kernel_count=kernel_count,
        short_kernel_count=short_count,
        short_kernel_share=_round(short_count / kernel_count) if kernel_count else None,
        short_kernel_threshold_us=settings.SHORT_KERNEL_US,
        median_kernel_us=_round(kernel_stats["median_kernel_us"]),
        mean_kernel_us=_round(kernel_stats["mean_kernel_us"]),
        gap_count=int(summary["gap_count"] or 0),
        median_gap_us=_round(summary["median_gap_us"]),
        p90_gap_us=_round(summary["p90_gap_us"]),
        max_gap_us=_round(summary["max_gap_us"]),
        gaps_by_class=gaps_by_class,
        blocking_calls=[BlockingCall(name=r["name"], gap_count=int(r["gap_count"]), gap_time_ms=_round(r["gap_time_ms"], 4))
                        for r in blocking],
        graph_launched_kernel_share=_round(kernel_stats["graph_launched_kernel_share"]),
        patterns_detected=[],
        dominant_pattern=None,
    )
    findings = _findings(metrics, ctx, claims) if metrics.idle_flagged else []
    metrics.patterns_detected = [f.finding_id.split(":", 1)[1] for f in findings]
    scored = [f for f in findings if f.impact_score is not None]
    if scored:
        metrics.dominant_pattern = max(scored, key=lambda f: f.impact_score).finding_id.split(":", 1)[1]
    elif findings:
        metrics.dominant_pattern = metrics.patterns_detected[0]
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="OK",
                       metrics=metrics.model_dump(mode="json"), findings=findings)


# ---- decisions ------------------------------------------------------------------------------


def _finding(slug: str, **fields) -> Finding:
    return Finding(finding_id=f"{AGENT_NAME}:{slug}", agent=AGENT_NAME, tier="system", category=AGENT_NAME, **fields)


def _claimed_ms(claimed: dict[int, float]) -> float:
    """The GPU time (ms) a finding's impact is computed from: the sum of its claims."""
    return sum(claimed.values()) / 1000.0


def _quantified(ctx: AnalysisContext, claimed_gaps: dict[int, float], fractions: tuple[float, float, float]) -> dict:
    """The impact ladder over the claimed gap time (the part of each gap above the residual)."""
    low, mid, high = _ladder(_claimed_ms(claimed_gaps), ctx.e2e_time_ms, fractions)
    return {"impact_low": low, "impact_score": mid, "impact_high": high,
            "recoverable_ms": round(mid * ctx.e2e_time_ms / 100.0, 4), "estimate_method": "heuristic",
            "claimed_gaps": claimed_gaps}


def _findings(m: CpuIdleMetrics, ctx: AnalysisContext, claims: dict[str, dict[int, float]]) -> list[Finding]:
    findings: list[Finding] = []
    evidence_sql = inline_trace_id(GAP_CLASSES_SQL, ctx.trace_id)
    common = {
        "idle_time_ms": m.idle_time_ms, "idle_time_percent": m.idle_time_percent,
        "total_time_ms": m.total_time_ms, "kernel_count": m.kernel_count,
        "short_kernel_share": m.short_kernel_share, "median_kernel_us": m.median_kernel_us,
        "median_gap_us": m.median_gap_us,
    }
    data_table = _gap_table(m)
    fmt_fractions = "/".join(f"{f:.2f}" for f in settings.IDLE_RECOVERY_FRACTIONS)

    launch = m.gaps_by_class["launch"]
    impact = _quantified(ctx, claims["launch"], settings.IDLE_RECOVERY_FRACTIONS)
    if launch.gap_count and impact["impact_score"] >= settings.MIN_PITEM_IMPACT_SCORE:
        many_short = (m.short_kernel_share or 0.0) >= settings.SHORT_KERNEL_SHARE_MIN
        slow_host = (m.median_gap_us or 0.0) > settings.LAUNCH_BOUND_MEDIAN_GAP_US
        launch_bound = many_short and slow_host
        slug = "launch-bound" if launch_bound else "host-overhead"
        title = ("Launch-bound: many short kernels separated by host launch gaps" if launch_bound
                 else "Host overhead between kernel launches leaves the GPU idle")
        confidence = confidence_from_quality("high" if launch_bound else "medium", ctx.quality_verdicts,
                                 ("linked_gpu_time_share", "same_stream_overlaps", "graph_replay"))
        insight = (
            f"The GPU is idle {m.idle_time_percent:.1f} % of the {m.total_time_ms:.2f} ms timeline; "
            f"{launch.idle_time_ms:.2f} ms of it ({launch.idle_percent_of_e2e:.1f} % of E2E) sits in {launch.gap_count} "
            f"gaps between kernels (median gap {m.median_gap_us or 0:.1f} us) while {m.short_kernel_count} of "
            f"{m.kernel_count} kernels run under {settings.SHORT_KERNEL_US:g} us (median {m.median_kernel_us or 0:.1f} us)."
        )
        action = ("Capture the steady-state step in a GPU graph so kernels are replayed back to back "
                  "without one host launch per kernel.")
        details = (
            f"**Identification:** {m.kernel_count} kernels, {m.short_kernel_count} of them shorter than "
            f"{settings.SHORT_KERNEL_US:g} us, are separated by host gaps: the host issues one launch per kernel "
            f"and cannot keep the launch queue ahead of the GPU (source: `cpu_idle_metrics.json` -> "
            f"`gaps_by_class.launch`, `short_kernel_share`, `median_gap_us`).\n\n"
            f"**Data:**\n\n{data_table}\n\n"
            f"**Reasoning for Slowdown:** the median gap ({m.median_gap_us or 0:.1f} us) is "
            f"{'above' if slow_host else 'not above'} the {settings.LAUNCH_BOUND_MEDIAN_GAP_US:g} us a full launch "
            f"queue leaves, and {100 * (m.short_kernel_share or 0):.0f} % of kernels are shorter than a typical host "
            f"launch (5-20 us). Each kernel finishes before the next one is launched, so GPU time is bounded by "
            f"host launch rate, not by kernel speed.\n\n"
            f"**Resolution:** a GPU graph records the kernel sequence once and replays it with a single host call, "
            f"which removes the per-kernel host cost from the critical path. Where capture is not possible, "
            f"compiling the step (fewer, fused kernels) or a larger batch per launch shrinks the same gaps.\n\n"
            f"**Impact estimate:** recoverable = {fmt_fractions} (low/mid/high) x the launch-gap time above "
            f"{settings.RESIDUAL_GAP_US:g} us per gap ({launch.recoverable_time_ms:.3f} ms) = "
            f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E (mid {impact['impact_score']:.1f} %, "
            f"about {impact['recoverable_ms']:.3f} ms)."
        )
        findings.append(_finding(
            slug, title=title, insight=insight, action=action, confidence=confidence,
            evidence={**common, "impact_basis_ms": _claimed_ms(claims["launch"]), "launch_gap_count": launch.gap_count, "launch_idle_ms": launch.idle_time_ms,
                      "launch_recoverable_ms": launch.recoverable_time_ms, "residual_gap_us": settings.RESIDUAL_GAP_US,
                      "recovery_fractions": list(settings.IDLE_RECOVERY_FRACTIONS)},
            evidence_sql=evidence_sql, details=details, **impact))

    sync = m.gaps_by_class["host_sync"]
    impact = _quantified(ctx, claims["host_sync"], settings.IDLE_RECOVERY_FRACTIONS)
    if sync.gap_count and impact["impact_score"] >= settings.MIN_PITEM_IMPACT_SCORE:
        calls = ", ".join(f"`{c.name}` ({c.gap_count})" for c in m.blocking_calls[:4]) or "a blocking call"
        confidence = confidence_from_quality("high", ctx.quality_verdicts, ("linked_gpu_time_share", "same_stream_overlaps"))
        insight = (
            f"{sync.gap_count} idle gap{'s' if sync.gap_count != 1 else ''} totalling {sync.idle_time_ms:.2f} ms ({sync.idle_percent_of_e2e:.1f} % of E2E) "
            f"start while the host is blocked in a synchronizing call: {calls}."
        )
        action = ("Remove the host synchronization from the step: keep the value on the device and read it back "
                  "asynchronously once per step instead of blocking on it.")
        details = (
            f"**Identification:** the GPU ran out of work while the host thread was inside {calls}; the launch queue "
            f"was empty when the call returned, so the GPU waited for the host to launch again (source: "
            f"`cpu_idle_metrics.json` -> `gaps_by_class.host_sync`, `blocking_calls`).\n\n"
            f"**Data:**\n\n{data_table}\n\n"
            f"**Reasoning for Slowdown:** a device or stream synchronization (also implied by reading a GPU scalar "
            f"on the host or a blocking copy) drains the launch queue. Every such point costs a full host "
            f"relaunch latency on the GPU timeline (median {sync.median_gap_us or 0:.1f} us, largest "
            f"{sync.max_gap_us or 0:.1f} us here).\n\n"
            f"**Resolution:** keep host-read values on the device (device-side checks, `non_blocking` copies into "
            f"pinned memory read one step later) so the host keeps launching ahead of the GPU.\n\n"
            f"**Impact estimate:** recoverable = {fmt_fractions} (low/mid/high) x the sync-gap time above "
            f"{settings.RESIDUAL_GAP_US:g} us per gap ({sync.recoverable_time_ms:.3f} ms) = "
            f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E."
        )
        findings.append(_finding(
            "host-sync", title="Host synchronization stalls drain the GPU launch queue", insight=insight,
            action=action, confidence=confidence,
            evidence={**common, "impact_basis_ms": _claimed_ms(claims["host_sync"]), "sync_gap_count": sync.gap_count, "sync_idle_ms": sync.idle_time_ms,
                      "sync_recoverable_ms": sync.recoverable_time_ms,
                      "blocking_calls": [c.model_dump() for c in m.blocking_calls]},
            evidence_sql=evidence_sql, details=details, **impact))

    bubble = m.gaps_by_class["pipeline_bubble"]
    impact = _quantified(ctx, claims["pipeline_bubble"], settings.BUBBLE_RECOVERY_FRACTIONS)
    if bubble.gap_count and impact["impact_score"] >= settings.MIN_PITEM_IMPACT_SCORE:
        confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share", "same_stream_overlaps"))
        insight = (
            f"{bubble.gap_count} gaps of {settings.LONG_GAP_US / 1000:g} ms or more leave the GPU idle for "
            f"{bubble.idle_time_ms:.2f} ms ({bubble.idle_percent_of_e2e:.1f} % of E2E; longest "
            f"{(bubble.max_gap_us or 0) / 1000:.2f} ms) with no blocking call on the host."
        )
        action = ("Overlap the host work between GPU phases with GPU execution: prepare the next step's inputs "
                  "on a background worker and prefetch them to the device.")
        details = (
            f"**Identification:** long idle gaps mid-trace, not explained by a synchronizing call, mean the host "
            f"was busy with something else (input preparation, Python bookkeeping, a scheduler) while the GPU "
            f"had nothing queued (source: `cpu_idle_metrics.json` -> `gaps_by_class.pipeline_bubble`).\n\n"
            f"**Data:**\n\n{data_table}\n\n"
            f"**Reasoning for Slowdown:** a gap of {settings.LONG_GAP_US / 1000:g} ms is far longer than any launch "
            f"latency, so the host was not launching at all. The trace does not show what it was doing, which "
            f"is why only a smaller share is credited.\n\n"
            f"**Resolution:** move the host work off the critical path (background data loading, pinned-memory "
            f"prefetch, asynchronous scheduling) so the next GPU phase is queued before the current one ends.\n\n"
            f"**Impact estimate:** recoverable = "
            f"{'/'.join(f'{f:.2f}' for f in settings.BUBBLE_RECOVERY_FRACTIONS)} (low/mid/high) x the bubble time "
            f"({bubble.recoverable_time_ms:.3f} ms) = {impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E."
        )
        findings.append(_finding(
            "pipeline-bubbles", title="Pipeline bubbles: long host-side gaps between GPU phases",
            insight=insight, action=action, confidence=confidence,
            evidence={**common, "impact_basis_ms": _claimed_ms(claims["pipeline_bubble"]), "bubble_gap_count": bubble.gap_count, "bubble_idle_ms": bubble.idle_time_ms,
                      "bubble_recoverable_ms": bubble.recoverable_time_ms, "long_gap_us": settings.LONG_GAP_US,
                      "recovery_fractions": list(settings.BUBBLE_RECOVERY_FRACTIONS)},
            evidence_sql=evidence_sql, details=details, **impact))

    edge = m.gaps_by_class["window_edge"]
    if edge.gap_count and m.idle_time_ms and edge.idle_time_ms >= settings.WINDOW_EDGE_IDLE_SHARE_MIN * m.idle_time_ms:
        confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share",))
        insight = (
            f"{edge.idle_time_ms:.2f} ms of the {m.idle_time_ms:.2f} ms idle time ({edge.idle_percent_of_e2e:.1f} % of "
            f"E2E) is in {edge.gap_count} gap{'s' if edge.gap_count != 1 else ''} at the start or end of the profile, outside "
            f"the steady-state GPU work."
        )
        action = ("Re-capture the profile over steady-state iterations only (a profiler schedule with warm-up "
                  "steps) so the idle share measures the workload, not the capture window.")
        details = (
            f"**Identification:** the first or last gap of the GPU timeline is {(edge.max_gap_us or 0) / 1000:.2f} ms "
            f"long, which usually means the profiler window opened (or closed) well before (after) the measured "
            f"work, or a stray kernel ran during set-up (source: `cpu_idle_metrics.json` -> "
            f"`gaps_by_class.window_edge`).\n\n"
            f"**Data:**\n\n{data_table}\n\n"
            f"**Reasoning for Slowdown:** this gap inflates the E2E denominator and the idle share, but it is not "
            f"part of a repeated step, so no change to the model recovers it.\n\n"
            f"**Resolution:** profile a window that starts and ends on step boundaries; the remaining gap classes "
            f"above are the ones to act on.\n\n"
            f"**Impact estimate:** not quantifiable from trace data: the gap is outside the steady state."
        )
        findings.append(_finding(
            "profile-window", title="Idle time dominated by a gap at the profile window edge", insight=insight,
            action=action, confidence=confidence, estimate_method="qualitative",
            evidence={**common, "edge_idle_ms": edge.idle_time_ms, "edge_max_gap_us": edge.max_gap_us},
            evidence_sql=evidence_sql, details=details))

    if not findings:
        confidence = confidence_from_quality("low", ctx.quality_verdicts, ("linked_gpu_time_share",))
        findings.append(_finding(
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
                     f"**Impact estimate:** not quantifiable from trace data.")))
    return findings
