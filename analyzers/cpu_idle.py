"""CPU / idle analyzer (system tier): why the GPU sits idle, and how much of that is recoverable.

TraceLens only reports the idle share (flagged above 15 %) and never quantifies it. Here every gap
between consecutive GPU busy intervals is a row of the `gpu_idle_gaps` mart, whose `gap_class`
(one rule for CUDA and HIP, set in SQL from dbt vars) says what the GPU waited for:

- `launch_bound`: the kernel closing the gap was launched late (it started within a launch latency of
  its launch) and the gap is short: the host could not launch as fast as the GPU ran;
- `host_work`: launched late, and the gap is long: the host was busy elsewhere (its python frames
  and cpu ops at both ends of the gap are named);
- `sync_blocked`: the launching thread sat in a synchronizing call spanning the whole gap and that call
  issued the GPU op closing it (a blocking copy);
- `queued_waiting`: the closing kernel had been queued well ahead and the GPU still waited (graph
  replay, another stream, a collective, an event): not a host problem;
- `window_edge`: a long first or last gap of the profile window: reported, never claimed.

The recoverable time of the host classes is the time their gaps exceed settings.RESIDUAL_GAP_US,
scaled by a low / mid / high recovery fraction (estimate_method "heuristic"). A finding claims those
gaps (`claimed_gaps`: gap_id -> the µs above the residual), and its impact is computed from their
sum. Host-work gaps are credited only where the host's frames were recorded and the GPU share is
not tiny (trace_quality's gpu_busy_share check warns); queued-waiting and window-edge gaps are never credited.
"""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.common import (
    NO_GPU_TIMELINE,
    confidence_from_quality,
    gpu_timeline_row,
    inline_trace_id,
    no_data_result,
    query_rows,
)
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Finding

AGENT_NAME = "cpu_idle"
TIER = "system"


GAP_CLASSES = ("launch_bound", "host_work", "sync_blocked", "queued_waiting", "window_edge")
CLAIMING_CLASSES = ("launch_bound", "host_work", "sync_blocked")  # host causes: their gaps can be recovered


class GapClassStats(BaseModel):
    gap_count: int = 0
    idle_time_ms: float = 0.0
    idle_percent_of_e2e: float = 0.0
    # sum over the class's creditable gaps of max(0, gap - settings.RESIDUAL_GAP_US): 0 for
    # queued_waiting and window_edge, host-work gaps only where the host's frames were recorded
    recoverable_time_ms: float = 0.0
    median_gap_us: float | None = None
    min_gap_us: float | None = None
    max_gap_us: float | None = None
    median_launch_lead_us: float | None = None  # the closing kernel's launch, before the gap ended
    median_launch_delay_us: float | None = None  # the closing kernel's launch, after the gap began
    host_evidence_gap_count: int = 0  # gaps with a python frame or cpu op recorded at either end


class GapReasonStats(BaseModel):
    gap_class: str
    reason: str
    gap_count: int
    idle_time_ms: float
    median_launch_lead_us: float | None


class BlockingCall(BaseModel):
    name: str
    gap_count: int  # gaps this call was in when the GPU went idle
    gap_time_ms: float
    median_return_after_gap_start_us: float | None  # when the call returned, after the gap began


class HostFrame(BaseModel):
    side: str  # "gap start" (the GPU went idle) or "gap end" (the host launched again)
    name: str  # innermost python frame, else innermost cpu op, of the launching thread
    gap_count: int
    gap_time_ms: float


class CpuIdleMetrics(BaseModel):
    idle_flagged: bool
    idle_threshold_percent: float
    total_time_ms: float  # the measured timeline
    analysis_window_ms: float  # E2E of every "% of E2E": the timeline less the window-edge idle
    window_edge_excluded: bool
    busy_time_ms: float
    busy_time_percent: float
    gpu_share_tiny: bool  # trace_quality gpu_busy_share warns: a harness or micro-benchmark, not a workload
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
    gaps_by_reason: list[GapReasonStats]
    blocking_calls: list[BlockingCall]  # sync_blocked gaps: the call spanning each
    drained_by_calls: list[BlockingCall]  # launch_bound / host_work gaps opened as a sync returned
    host_frames: list[HostFrame]  # host_work gaps: what the host ran at either end
    graph_launched_kernel_share: float | None
    patterns_detected: list[str]
    dominant_pattern: str | None


# ---- SQL --------------------------------------------------------------------------------------
# Each query takes the trace id once, through `params`, so that evidence_sql is the same text
# with the id inlined. The classes come from the mart; only the creditable part is computed here.

_GAPS_CTE = f"""
with params as (select ?::varchar as trace_id),
gaps as (
    select gpu_idle_gaps.*,
        coalesce(start_python_function_name, start_cpu_op_name, end_python_function_name, end_cpu_op_name)
            is not null as has_host_evidence
    from gpu_idle_gaps, params
    where gpu_idle_gaps.trace_id = params.trace_id
),
classified_gaps as (
    select
        gap_id,
        gap_class,
        gap_class_reason,
        duration_us as gap_us,
        launch_lead_us,
        launch_delay_us,
        has_host_evidence,
        case
            when gap_class in ('launch_bound', 'sync_blocked') or (gap_class = 'host_work' and has_host_evidence)
                then greatest(duration_us - {settings.RESIDUAL_GAP_US}, 0)
            else 0
        end as recoverable_us,
        start_runtime_name,
        start_runtime_end_us - start_us as runtime_return_after_gap_start_us,
        coalesce(start_python_function_name, start_cpu_op_name) as start_frame,
        coalesce(end_python_function_name, end_cpu_op_name) as end_frame
    from gaps
)"""

GAP_CLASSES_SQL = _GAPS_CTE + """
select
    gap_class,
    count(*) as gap_count,
    sum(gap_us) / 1000 as idle_time_ms,
    sum(recoverable_us) / 1000 as recoverable_time_ms,
    median(gap_us) as median_gap_us,
    min(gap_us) as min_gap_us,
    max(gap_us) as max_gap_us,
    median(launch_lead_us) as median_launch_lead_us,
    median(launch_delay_us) as median_launch_delay_us,
    count(*) filter (where has_host_evidence) as host_evidence_gap_count
from classified_gaps
group by gap_class
order by idle_time_ms desc"""

GAP_REASONS_SQL = _GAPS_CTE + """
select gap_class, gap_class_reason as reason, count(*) as gap_count, sum(gap_us) / 1000 as idle_time_ms,
    median(launch_lead_us) as median_launch_lead_us
from classified_gaps
group by all
order by idle_time_ms desc, gap_class, reason"""

GAP_SUMMARY_SQL = _GAPS_CTE + """
select
    count(*) as gap_count,
    median(gap_us) as median_gap_us,
    quantile_cont(gap_us, 0.9) as p90_gap_us,
    max(gap_us) as max_gap_us,
    sum(gap_us) / 1000 as idle_time_ms
from classified_gaps"""

# The synchronizing call the launching thread was in when the GPU went idle: spanning the gap
# (sync_blocked), or returning inside it before the host relaunched (launched_after_sync_returned).
SYNC_CALLS_SQL = _GAPS_CTE + """
select
    gap_class = 'sync_blocked' as spans_gap,
    start_runtime_name as name,
    count(*) as gap_count,
    sum(gap_us) / 1000 as gap_time_ms,
    median(runtime_return_after_gap_start_us) as median_return_after_gap_start_us
from classified_gaps
where gap_class = 'sync_blocked' or gap_class_reason = 'launched_after_sync_returned'
group by all
order by gap_time_ms desc, name"""

# What the host ran at either end of its host-work gaps.
HOST_FRAMES_SQL = _GAPS_CTE + """
select side, name, count(*) as gap_count, sum(gap_us) / 1000 as gap_time_ms
from (
    select 'gap start' as side, start_frame as name, gap_us from classified_gaps where gap_class = 'host_work'
    union all
    select 'gap end' as side, end_frame as name, gap_us from classified_gaps where gap_class = 'host_work'
) as frames
where name is not null
group by all
order by gap_time_ms desc, side desc, name"""

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


def _class_stats(row: dict | None, e2e_ms: float) -> GapClassStats:
    if row is None:
        return GapClassStats()
    return GapClassStats(
        gap_count=int(row["gap_count"]),
        idle_time_ms=_round(row["idle_time_ms"], 4),
        idle_percent_of_e2e=_round(100.0 * row["idle_time_ms"] / e2e_ms, 3),
        recoverable_time_ms=_round(row["recoverable_time_ms"], 4),
        median_gap_us=_round(row["median_gap_us"]),
        min_gap_us=_round(row["min_gap_us"]),
        max_gap_us=_round(row["max_gap_us"]),
        median_launch_lead_us=_round(row["median_launch_lead_us"]),
        median_launch_delay_us=_round(row["median_launch_delay_us"]),
        host_evidence_gap_count=int(row["host_evidence_gap_count"]),
    )


def _sync_calls(rows: list[dict], spanning: bool) -> list[BlockingCall]:
    return [BlockingCall(name=r["name"], gap_count=int(r["gap_count"]), gap_time_ms=_round(r["gap_time_ms"], 4),
                         median_return_after_gap_start_us=_round(r["median_return_after_gap_start_us"]))
            for r in rows if bool(r["spans_gap"]) == spanning]


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Idle time of one trace: how much, in which kind of gaps, and what would recover it."""
    tl = gpu_timeline_row(db, TIMELINE_SQL, ctx.trace_id)
    if tl is None:
        return no_data_result(AGENT_NAME, "system", NO_GPU_TIMELINE)
    e2e_ms = float(tl["total_time_ms"])
    kernel_stats = query_rows(db, KERNEL_STATS_SQL, [ctx.trace_id])[0]
    summary = query_rows(db, GAP_SUMMARY_SQL, [ctx.trace_id])[0]
    classes = {r["gap_class"]: r for r in query_rows(db, GAP_CLASSES_SQL, [ctx.trace_id])}
    sync_calls = query_rows(db, SYNC_CALLS_SQL, [ctx.trace_id])
    claims = _claimed_gaps(db, ctx.trace_id)

    kernel_count = int(kernel_stats["kernel_count"] or 0)
    short_count = int(kernel_stats["short_kernel_count"] or 0)
    idle_percent = float(tl["idle_time_percent"] or 0.0)
    busy_percent = 100.0 * float(tl["busy_time_ms"] or 0.0) / e2e_ms
    metrics = CpuIdleMetrics(
        idle_flagged=idle_percent > settings.IDLE_PERCENT_MAX,
        idle_threshold_percent=settings.IDLE_PERCENT_MAX,
        total_time_ms=_round(e2e_ms, 4),
        analysis_window_ms=_round(ctx.e2e_time_ms, 4),
        window_edge_excluded=abs(ctx.e2e_time_ms - e2e_ms) > 1e-9,
        busy_time_ms=_round(tl["busy_time_ms"], 4),
        busy_time_percent=_round(busy_percent),
        gpu_share_tiny=ctx.quality_verdicts.get("gpu_busy_share") in ("warn", "fail"),
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
        # % of E2E as every finding's: the analysis window (the timeline less the window-edge idle)
        gaps_by_class={name: _class_stats(classes.get(name), ctx.e2e_time_ms) for name in GAP_CLASSES},
        gaps_by_reason=[GapReasonStats(gap_class=r["gap_class"], reason=r["reason"], gap_count=int(r["gap_count"]),
                                       idle_time_ms=_round(r["idle_time_ms"], 4),
                                       median_launch_lead_us=_round(r["median_launch_lead_us"]))
                        for r in query_rows(db, GAP_REASONS_SQL, [ctx.trace_id])],
        blocking_calls=_sync_calls(sync_calls, spanning=True),
        drained_by_calls=_sync_calls(sync_calls, spanning=False),
        host_frames=[HostFrame(side=r["side"], name=r["name"], gap_count=int(r["gap_count"]),
                               gap_time_ms=_round(r["gap_time_ms"], 4))
                     for r in query_rows(db, HOST_FRAMES_SQL, [ctx.trace_id])],
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


def _findings(m: CpuIdleMetrics, ctx: AnalysisContext, claims: dict[str, dict[int, float]]) -> list[Finding]:
    evidence_sql = inline_trace_id(GAP_CLASSES_SQL, ctx.trace_id)
    common = {
        "idle_time_ms": m.idle_time_ms, "idle_time_percent": m.idle_time_percent,
        "total_time_ms": m.total_time_ms, "busy_time_percent": m.busy_time_percent, "kernel_count": m.kernel_count,
        "short_kernel_share": m.short_kernel_share, "median_kernel_us": m.median_kernel_us,
        "median_gap_us": m.median_gap_us,
    }
    shared = {"m": m, "ctx": ctx, "claims": claims, "common": common, "evidence_sql": evidence_sql,
              "data_table": _gap_table(m)}
    findings = [f for f in (_launch_bound(**shared), _host_work(**shared), _sync_blocked(**shared),
                            _queued_waiting(**shared), _window_edge(**shared)) if f is not None]
    return findings or [_unattributed(**shared)]


def _fractions_text(fractions: tuple[float, float, float]) -> str:
    return "/".join(f"{f:.2f}" for f in fractions)


def _launch_bound(m, ctx, claims, common, evidence_sql, data_table) -> Finding | None:
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


def _host_work(m, ctx, claims, common, evidence_sql, data_table) -> Finding | None:
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
    frames_text = (
        (f" When the GPU went idle the host was in {at_start}" if at_start else " No python frame or cpu op of the "
         "launching thread was recorded when the GPU went idle")
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
    if ctx.facts.serving_engine_op_count:
        # inside a serving step there is no input pipeline to move: the host stalls in the forward
        action = ("Take the host out of the step: the named frames stall inside the forward pass, which the "
                  "serving engine's GPU-graph mode (or CUDA / HIP graphs) removes; if they remain, look for CPU "
                  "contention or a synchronizing call in those frames.")
    else:
        action = ("Move the host work named above off the critical path: prepare the next step's inputs on a "
                  "background worker (DataLoader workers, pinned-memory prefetch), or overlap it with the GPU work "
                  "of the current step.")
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
        f"**Resolution:** move the host work off the critical path (background data loading, pinned-memory "
        f"prefetch, asynchronous scheduling) so the next GPU phase is queued before the current one ends.\n\n"
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


def _sync_blocked(m, ctx, claims, common, evidence_sql, data_table) -> Finding | None:
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


def _queued_waiting(m, ctx, claims, common, evidence_sql, data_table) -> Finding | None:
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
    action = ("Look at what the queued work depends on: overlap the collective or the other stream's work with "
              "computation, record events earlier, or reorder streams; host-side changes (graphs, fewer launches) "
              "do not recover this time.")
    details = (
        f"**Identification:** class `queued_waiting` of `gpu_idle_gaps`: the kernel that ends each gap waited longer "
        f"after its launch than a launch takes and longer than the host took to issue it (source: "
        f"`cpu_idle_metrics.json` -> `gaps_by_class.queued_waiting`, `gaps_by_reason`).\n\n"
        f"**Data:**\n\n{data_table}\n\n"
        f"**Reasoning for Slowdown:** the host was ahead of the GPU; the GPU was held by a dependency "
        f"({reasons_text}).\n\n"
        f"**Resolution:** shorten or overlap the dependency (communication/computation overlap, earlier event "
        f"records, fewer cross-stream waits).\n\n"
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


def _window_edge(m, ctx, claims, common, evidence_sql, data_table) -> Finding | None:
    edge = m.gaps_by_class["window_edge"]
    if not (edge.gap_count and m.idle_time_ms and edge.idle_time_ms >= settings.WINDOW_EDGE_IDLE_SHARE_MIN * m.idle_time_ms):
        return None
    confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share",))
    insight = (
        f"{edge.idle_time_ms:.2f} ms of the {m.idle_time_ms:.2f} ms idle time ({100.0 * edge.idle_time_ms / m.total_time_ms:.1f} % of "
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


def _unattributed(m, ctx, claims, common, evidence_sql, data_table) -> Finding:
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
    if ctx.facts.serving_engine_op_count:
        return (f"Run the step in the serving engine's GPU-graph mode (it issues `{ctx.facts.serving_engine_op_example}`; "
                "e.g. vLLM without `enforce_eager`, SGLang without `--disable-cuda-graph`) so kernels are replayed "
                "back to back without one host launch per kernel.")
    how = ("`torch.cuda.graphs` / `torch.cuda.make_graphed_callables`" if ctx.facts.is_compiled else
           "`torch.cuda.graphs`, or torch.compile mode=\"reduce-overhead\"")
    return (f"Capture the steady-state step in a GPU graph (CUDA / HIP graphs: {how}) so kernels are replayed back "
            "to back without one host launch per kernel.")
