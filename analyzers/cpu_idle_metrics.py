"""What the cpu_idle agent measures: the trace's idle gaps by class (gpu_idle_gaps and the idle-gap
marts built on it), the kernels' lengths and the timeline; and the gaps each class can claim."""

from __future__ import annotations

from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.common import gpu_timeline_row, query_rows
from tracelake.analyzers.contracts import AnalysisContext

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
    name: str  # the data-loading frame, else innermost python frame, else innermost cpu op, of the launching thread
    gap_count: int
    gap_time_ms: float
    is_data_loading: bool = False  # the host was fetching a batch (a DataLoader frame)


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

GAP_CLASSES_SQL = _GAPS_CTE + """,
e2e as (
    -- the report's E2E: the timeline less the idle at the profile window's edges
    select workload_facts.analysis_window_ms as e2e_time_ms
    from workload_facts, params
    where workload_facts.trace_id = params.trace_id
)
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
    count(*) filter (where has_host_evidence) as host_evidence_gap_count,
    100.0 * sum(gap_us) / 1000 / any_value(e2e.e2e_time_ms) as idle_percent_of_e2e
from classified_gaps
cross join e2e
group by gap_class
order by idle_time_ms desc"""

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

TIMELINE_SQL = ("select total_time_ms, busy_time_ms, idle_time_ms, idle_time_percent, computation_time_percent, "
                "exposed_comm_time_percent, exposed_memcpy_time_percent from gpu_timeline where trace_id = ?")


def claimed_gaps(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, dict[int, float]]:
    """gap class -> {gap_id: the µs of the gap above settings.RESIDUAL_GAP_US} (the class's claims)."""
    claims: dict[str, dict[int, float]] = {name: {} for name in GAP_CLASSES}
    for gap_class, gap_id, recoverable_us in db.execute(CLAIMED_GAPS_SQL, [trace_id]).fetchall():
        claims[gap_class][int(gap_id)] = float(recoverable_us)
    return claims


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)


def _round_ms(value: float, digits: int = 4) -> float:
    return round(float(value), digits)


def _class_stats(row: dict[str, Any] | None, e2e_ms: float) -> GapClassStats:
    if row is None:
        return GapClassStats()
    return GapClassStats(
        gap_count=int(row["gap_count"]),
        idle_time_ms=_round_ms(row["idle_time_ms"]),
        idle_percent_of_e2e=_round_ms(100.0 * row["idle_time_ms"] / e2e_ms, 3),
        recoverable_time_ms=_round_ms(row["recoverable_time_ms"]),
        median_gap_us=_round(row["median_gap_us"]),
        min_gap_us=_round(row["min_gap_us"]),
        max_gap_us=_round(row["max_gap_us"]),
        median_launch_lead_us=_round(row["median_launch_lead_us"]),
        median_launch_delay_us=_round(row["median_launch_delay_us"]),
        host_evidence_gap_count=int(row["host_evidence_gap_count"]),
    )


def _sync_calls(rows: list[dict[str, Any]], spanning: bool) -> list[BlockingCall]:
    return [BlockingCall(name=r["name"], gap_count=int(r["gap_count"]), gap_time_ms=_round_ms(r["gap_time_ms"]),
                         median_return_after_gap_start_us=_round(r["median_return_after_gap_start_us"]))
            for r in rows if bool(r["spans_gap"]) == spanning]


def _gap_summary(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, Any]:
    """Count and length distribution of the trace's idle gaps (no gaps: a count of 0)."""
    found = query_rows(db, "select gap_count, median_gap_us, p90_gap_us, max_gap_us "
                           "from gpu_idle_gap_summary where trace_id = ?", [trace_id])
    return found[0] if found else {"gap_count": 0, "median_gap_us": None, "p90_gap_us": None, "max_gap_us": None}


def _gap_reasons(db: duckdb.DuckDBPyConnection, trace_id: str) -> list[GapReasonStats]:
    return [GapReasonStats(gap_class=r["gap_class"], reason=r["reason"], gap_count=int(r["gap_count"]),
                           idle_time_ms=_round_ms(r["idle_time_ms"]),
                           median_launch_lead_us=_round(r["median_launch_lead_us"]))
            for r in query_rows(db, "select gap_class, reason, gap_count, idle_time_ms, median_launch_lead_us "
                                    "from gpu_idle_gap_reasons where trace_id = ? order by idle_time_ms desc, gap_class, reason",
                                [trace_id])]


def _host_frames(db: duckdb.DuckDBPyConnection, trace_id: str) -> list[HostFrame]:
    return [HostFrame(side=r["side"], name=r["name"], gap_count=int(r["gap_count"]), gap_time_ms=_round_ms(r["gap_time_ms"]),
                      is_data_loading=bool(r["is_data_loading"]))
            for r in query_rows(db, "select side, name, gap_count, gap_time_ms, is_data_loading from gpu_idle_host_frames "
                                    "where trace_id = ? order by gap_time_ms desc, side desc, name", [trace_id])]


def read_metrics(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> CpuIdleMetrics | None:
    """Idle time of one trace, by gap class, with the kernels' lengths; None without GPU time."""
    tl = gpu_timeline_row(db, TIMELINE_SQL, ctx.trace_id)
    if tl is None:
        return None
    e2e_ms = float(tl["total_time_ms"])
    kernel_stats = query_rows(db, KERNEL_STATS_SQL, [ctx.trace_id])[0]
    summary = _gap_summary(db, ctx.trace_id)
    classes = {r["gap_class"]: r for r in query_rows(db, GAP_CLASSES_SQL, [ctx.trace_id])}
    sync_calls = query_rows(db, "select spans_gap, name, gap_count, gap_time_ms, median_return_after_gap_start_us "
                                "from gpu_idle_sync_calls where trace_id = ? order by gap_time_ms desc, name", [ctx.trace_id])
    kernel_count = int(kernel_stats["kernel_count"] or 0)
    short_count = int(kernel_stats["short_kernel_count"] or 0)
    idle_percent = float(tl["idle_time_percent"] or 0.0)
    busy_percent = 100.0 * float(tl["busy_time_ms"] or 0.0) / e2e_ms
    return CpuIdleMetrics(
        idle_flagged=idle_percent > settings.IDLE_PERCENT_MAX,
        idle_threshold_percent=settings.IDLE_PERCENT_MAX,
        total_time_ms=_round_ms(e2e_ms),
        analysis_window_ms=_round_ms(ctx.e2e_time_ms),
        window_edge_excluded=abs(ctx.e2e_time_ms - e2e_ms) > 1e-9,
        busy_time_ms=_round_ms(tl["busy_time_ms"]),
        busy_time_percent=_round_ms(busy_percent, 3),
        gpu_share_tiny=ctx.quality_verdicts.get("gpu_busy_share") in ("warn", "fail"),
        idle_time_ms=_round_ms(tl["idle_time_ms"]),
        idle_time_percent=_round_ms(idle_percent, 3),
        computation_time_percent=_round_ms(tl["computation_time_percent"] or 0.0, 3),
        exposed_comm_time_percent=_round_ms(tl["exposed_comm_time_percent"] or 0.0, 3),
        exposed_memcpy_time_percent=_round_ms(tl["exposed_memcpy_time_percent"] or 0.0, 3),
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
        gaps_by_reason=_gap_reasons(db, ctx.trace_id),
        blocking_calls=_sync_calls(sync_calls, spanning=True),
        drained_by_calls=_sync_calls(sync_calls, spanning=False),
        host_frames=_host_frames(db, ctx.trace_id),
        graph_launched_kernel_share=_round(kernel_stats["graph_launched_kernel_share"]),
        patterns_detected=[],
        dominant_pattern=None,
    )
