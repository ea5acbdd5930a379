"""Where on the trace's timeline each finding's claim lies: the window of its claimed GPU events and
idle gaps, the profiler steps it overlaps, and, for idle gaps, the host work that ran inside them.
Read from the marts (gpu_claim_targets, profiler_steps, gpu_idle_gaps, events); written into `findings`
and `analysis.md`, and what `tracelake export --finding P<n>` trims the trace to."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, HostActivity

# The span of each finding's claimed items (gpu_claim_targets: GPU events and idle gaps) and the
# profiler steps any of them overlaps.
WINDOWS_SQL = """
select claims.finding_id, min(items.start_us) as ts_start_us, max(items.end_us) as ts_end_us,
    coalesce(list(distinct steps.step_number order by steps.step_number) filter (where steps.step_number is not null), [])
from claims
inner join gpu_claim_targets as items
    on items.trace_id = $trace_id and items.kind = claims.kind and items.item_id = claims.item_id
left join profiler_steps as steps
    on steps.trace_id = $trace_id and steps.span_start_us < items.end_us and steps.span_end_us > items.start_us
group by claims.finding_id
"""

# Host work that started and ended inside a finding's idle gaps: what the host did while the GPU
# waited (a data loader's __next__, a synchronizing copy). Frames spanning a whole gap are context
# (the training loop itself), not the work that kept the GPU idle.
HOST_ACTIVITY_SQL = """
with gaps as (
    select claims.finding_id, gaps.start_us, gaps.end_us
    from claims
    inner join gpu_idle_gaps as gaps on gaps.trace_id = $trace_id and gaps.gap_id = claims.item_id
    where claims.kind = 'idle_gap'
),
inside as (
    select gaps.finding_id, events.category, events.name, events.dur_us
    from gaps
    inner join events
        on events.trace_id = $trace_id
        and events.ts_us >= gaps.start_us and events.end_us <= gaps.end_us
    where events.category in ('python_function', 'cpu_op', 'user_annotation') and events.phase = 'X'
),
ranked as (
    select
        finding_id,
        case when category = 'python_function' then 'python' else 'host_op' end as kind,
        name,
        sum(dur_us) / 1000.0 as time_ms,
        count(*) as calls,
        row_number() over (partition by finding_id, category = 'python_function'
                           order by sum(dur_us) desc, name) as position
    from inside
    group by finding_id, category = 'python_function', name
)
select finding_id, kind, name, time_ms, calls from ranked
where position <= $top order by finding_id, kind, time_ms desc, name
"""


def _claims(results: list[AgentResult]) -> pa.Table:
    rows = [(f.finding_id, kind, int(item))
            for r in results for f in r.findings
            for kind, items in (("gpu_event", f.claimed_kernels), ("idle_gap", f.claimed_gaps)) for item in items]
    return pa.table({"finding_id": [r[0] for r in rows], "kind": [r[1] for r in rows],
                     "item_id": pa.array([r[2] for r in rows], pa.int64())})


def with_finding_windows(db: duckdb.DuckDBPyConnection, trace_id: str,
                         results: list[AgentResult]) -> list[AgentResult]:
    """Every finding with the window and steps of what it claims, and the host work inside its
    claimed idle gaps (findings that claim nothing keep none)."""
    cursor = db.cursor()
    try:
        cursor.register("claims", _claims(results))
        params = {"trace_id": trace_id}
        windows = {row[0]: row[1:] for row in cursor.execute(WINDOWS_SQL, params).fetchall()}
        activity: dict[str, list[HostActivity]] = {}
        for finding_id, kind, name, time_ms, calls in cursor.execute(
                HOST_ACTIVITY_SQL, {**params, "top": settings.FINDING_HOST_ACTIVITY_TOP}).fetchall():
            activity.setdefault(finding_id, []).append(HostActivity(kind=kind, name=name, time_ms=time_ms, calls=calls))
    finally:
        cursor.close()
    return [r.model_copy(update={"findings": [
        f.model_copy(update={"ts_start_us": windows[f.finding_id][0], "ts_end_us": windows[f.finding_id][1],
                             "steps": list(windows[f.finding_id][2]),
                             "host_activity": activity.get(f.finding_id, [])})
        if f.finding_id in windows else f
        for f in r.findings]}) for r in results]
