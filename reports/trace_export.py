"""A window of a stored trace as Chrome-trace JSON that Perfetto and chrome://tracing open, with the
trace's findings overlaid on a track of their own (`tracelake export`).

The events come from the `events` mart (every event of the trace: its phase, category, name, times,
pid / tid, flow id and args), chosen by reports/trace_window_events.py (a window with the host side of
its GPU work, a step with the GPU work it launched, flows only whole) with the source's top-level keys
(`trace_headers`); the windows from `findings` (ts_start_us / ts_end_us) and `profiler_steps`. A job
(`job_trace`) exports as one file: its ranks' events on the job clock of `collective_calls`
(docs/jobs.md), one process per rank."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import duckdb

from tracelake.core.errors import TraceLakeError
from tracelake.reports.trace_counters import counter_events
from tracelake.reports.trace_window_events import trace_header, trace_id_value, window_event_rows

FINDINGS_PID = "TraceLake findings"  # the annotation track's process name (a string pid: no clash with the trace's)
WINDOW_TID = "exported window"

FINDINGS_SQL = """
select global_rank, finding_id, title, impact_mid_percent, recoverable_ms, confidence, ts_start_us, ts_end_us, steps
from findings
where trace_id = $trace_id and trace2_id is null and ts_start_us is not null
  and ts_start_us <= $end_us and ts_end_us >= $start_us
order by global_rank
"""


@dataclass(frozen=True)
class Window:
    start_us: float
    end_us: float
    label: str  # what was asked for: "P2", "ProfilerStep#3", "window", "whole trace"
    # a step's host span and GPU span: the export holds its host side, the GPU work launched from it
    # and the unlinked GPU events of its GPU span (reports/trace_window_events.py); None: everything
    # overlapping the window and the launches of its GPU work
    host_span_us: tuple[float, float] | None = None
    gpu_span_us: tuple[float, float] | None = None


def _has_findings(con: duckdb.DuckDBPyConnection) -> bool:
    """`analyze` makes the findings table: a warehouse only ever ingested into has none."""
    row = con.execute("select count(*) from information_schema.tables where table_name = 'findings'").fetchone()
    return bool(row and row[0])


def finding_window(con: duckdb.DuckDBPyConnection, trace_id: str, rank: int) -> Window:
    analyzed = _has_findings(con) and con.execute(
        "select count(*) from findings where trace_id = ? and trace2_id is null", [trace_id]).fetchone() != (0,)
    if not analyzed:
        raise TraceLakeError(f"trace {trace_id} has no findings yet, so no P{rank}: run `tracelake analyze` on it first, "
                             "or export it without --finding (whole, --step N or --window START:END)")
    row = con.execute("select ts_start_us, ts_end_us, title from findings where trace_id = ? and trace2_id is null "
                      "and global_rank = ?", [trace_id, rank]).fetchone()
    if row is None:
        raise TraceLakeError(f"trace {trace_id} has no finding P{rank}: run `tracelake analyze` on it first, or see "
                             "its analysis.md for the P numbers")
    if row[0] is None:
        raise TraceLakeError(f"P{rank} ({row[2]}) claims no GPU event or idle gap, so it has no window; use --window "
                             "START:END or --step N")
    return Window(row[0], row[1], f"P{rank}")


def step_window(con: duckdb.DuckDBPyConnection, trace_id: str, step: int) -> Window:
    row = con.execute("select span_start_us, span_end_us, host_start_us, host_start_us + 1000.0 * host_time_ms, "
                      "coalesce(gpu_start_us, host_start_us), coalesce(gpu_start_us + 1000.0 * gpu_time_ms, host_start_us) "
                      "from profiler_steps where trace_id = ? and step_number = ?", [trace_id, step]).fetchone()
    if row is None:
        steps = [r[0] for r in con.execute("select step_number from profiler_steps where trace_id = ? order by 1",
                                           [trace_id]).fetchall()]
        listed = f"its steps are {steps[0]}-{steps[-1]}" if steps else "it has no ProfilerStep#N annotations"
        raise TraceLakeError(f"trace {trace_id} has no ProfilerStep#{step}; {listed}")
    return Window(row[0], row[1], f"ProfilerStep#{step}", (row[2], row[3]), (row[4], row[5]))


def whole_trace(con: duckdb.DuckDBPyConnection, trace_id: str) -> Window:
    row = con.execute("select min(ts_us), max(coalesce(end_us, ts_us)) from events where trace_id = ? and phase <> 'M'",
                      [trace_id]).fetchone()
    if row is None or row[0] is None:
        raise TraceLakeError(f"trace {trace_id} has no timed event (only metadata): there is nothing to export")
    return Window(row[0], row[1], "whole trace")


def parse_window(text: str) -> Window:
    """START:END as given (either may be -inf / inf: see `within_trace`)."""
    start, sep, end = text.partition(":")
    try:
        window = Window(float(start), float(end), "window")
    except ValueError:
        window = Window(math.nan, math.nan, "window")
    if math.isnan(window.start_us) or math.isnan(window.end_us):
        raise TraceLakeError(f"--window {text!r} is not START:END in trace microseconds (e.g. 1419120000000:1419120050000)")
    if not sep or window.end_us <= window.start_us:
        raise TraceLakeError(f"--window {text!r}: END must be after START (START:END, trace microseconds)")
    return window


def ts_base_us(con: duckdb.DuckDBPyConnection, trace_id: str) -> int:
    """What the trace's timestamps are stored less (traces.ts_base_us: non-zero on an absolute clock)."""
    row = con.execute("select ts_base_us from traces where trace_id = ?", [trace_id]).fetchone()
    return int(row[0]) if row is not None and row[0] else 0


def within_trace(con: duckdb.DuckDBPyConnection, trace_id: str, window: Window) -> Window:
    """`window` (on the trace's own clock, as its file and the report's cards show it) cut to the
    trace's span (`0:inf` is from 0 to the trace's end): the exported window and its track event then
    have finite bounds that JSON can hold."""
    base = ts_base_us(con, trace_id)
    span = whole_trace(con, trace_id)
    start, end = max(window.start_us - base, span.start_us), min(window.end_us - base, span.end_us)
    if end <= start:
        raise TraceLakeError(f"--window {window.start_us:g}:{window.end_us:g} holds none of the trace, whose events "
                             f"span {span.start_us + base:.3f}:{span.end_us + base:.3f} (trace microseconds)")
    return Window(start, end, window.label)


def _event(phase: str, category: str | None, name: str | None, ts_us: float | None, dur_us: float | None,
           pid: str | None, tid: str | None, flow_id: int | None, args: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {"ph": phase, "name": name, "pid": trace_id_value(pid), "tid": trace_id_value(tid)}
    if category is not None:
        event["cat"] = category
    if ts_us is not None:
        event["ts"] = ts_us
    if phase == "X":
        event["dur"] = dur_us or 0.0
    if flow_id is not None:
        event["id"] = flow_id
        if phase == "f":
            event["bp"] = "e"
    if args:
        event["args"] = json.loads(args)
    return event


def _annotations(con: duckdb.DuckDBPyConnection, trace_id: str, window: Window) -> list[dict[str, Any]]:
    where = {"trace_id": trace_id, "start_us": window.start_us, "end_us": window.end_us}
    rows = con.execute(FINDINGS_SQL, where).fetchall() if _has_findings(con) else []
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": FINDINGS_PID, "tid": 0, "args": {"name": FINDINGS_PID}},
        {"ph": "M", "name": "thread_name", "pid": FINDINGS_PID, "tid": WINDOW_TID, "args": {"name": WINDOW_TID}},
        {"ph": "X", "cat": "tracelake", "name": f"exported: {window.label}", "pid": FINDINGS_PID, "tid": WINDOW_TID,
         "ts": window.start_us, "dur": window.end_us - window.start_us,
         "args": {"trace_id": trace_id, "start_us": window.start_us, "end_us": window.end_us}},
    ]
    for rank, finding_id, title, impact, recoverable_ms, confidence, start_us, end_us, steps in rows:
        track = f"P{rank}"
        start, end = max(start_us, window.start_us), min(end_us, window.end_us)
        events.append({"ph": "M", "name": "thread_name", "pid": FINDINGS_PID, "tid": track,
                       "args": {"name": f"P{rank}: {title}"}})
        events.append({"ph": "X", "cat": "tracelake.finding", "name": f"P{rank}: {title}", "pid": FINDINGS_PID,
                       "tid": track, "ts": start, "dur": max(0.0, end - start),
                       "args": {"finding_id": finding_id, "title": title, "impact_percent_of_e2e": impact,
                                "recoverable_ms": recoverable_ms, "confidence": confidence,
                                "window_us": [start_us, end_us], "steps": list(steps or [])}})
    return events


def trimmed_trace(con: duckdb.DuckDBPyConnection, trace_id: str, window: Window,
                  critical_path: bool = False, counters: bool = False) -> dict[str, Any]:
    """The trace's events of `window` (reports/trace_window_events.py: with the host side of its GPU
    work and only whole flows; its metadata events too; with `critical_path`, the critical path's
    nodes marked and chained; with `counters`, the bandwidth and queue counter tracks of its GPU span:
    reports/trace_counters.py), the findings track and the source's header."""
    gpu_span = window.gpu_span_us or (window.start_us, window.end_us)
    rows = window_event_rows(con, trace_id, gpu_span, window.host_span_us, critical_path)
    if not any(row[0] != "M" for row in rows):
        raise TraceLakeError(f"no event of trace {trace_id} lies in {window.start_us:.1f}-{window.end_us:.1f} us; "
                             "the trace's time range is in `select min(ts_us), max(end_us) from events`")
    events = [_event(*row) for row in rows] + _annotations(con, trace_id, window)
    if counters:
        events += counter_events(con, trace_id, *gpu_span)
    document: dict[str, Any] = {**trace_header(con, trace_id), "traceEvents": events}
    document.setdefault("displayTimeUnit", "ms")
    document["tracelake_export"] = {"trace_id": trace_id, "window": window.label, "start_us": window.start_us,
                                    "end_us": window.end_us}
    return document


# ---- a job: its ranks as one Chrome trace on the job clock ----------------------------------------

# Each rank's events on the job clock (docs/jobs.md: base_time_us + ts - the node's applied offset,
# in µs since the job's epoch), one process per rank (pid = rank), one thread per (pid, tid) of the
# rank's own trace, named after that trace's process and thread; flow ids renumbered over the job.
JOB_EVENTS_SQL = """
with members as (
    select
        job_ranks.rank,
        job_ranks.trace_id,
        job_ranks.base_time_us - jobs.epoch_us
            - coalesce(case when job_clock_offsets.applied then job_clock_offsets.offset_us end, 0) as shift_us
    from job_ranks
    inner join jobs on jobs.job_id = job_ranks.job_id
    left join job_clock_offsets
        on job_clock_offsets.job_id = job_ranks.job_id and job_clock_offsets.node_id = job_ranks.node_id
    where job_ranks.job_id = $job
),
timed as (
    select
        members.rank, events.trace_id, events.event_idx, events.phase, events.category, events.name,
        events.ts_us + members.shift_us as ts_us, events.dur_us, events.pid, events.tid, events.flow_id, events.args
    from events
    inner join members on members.trace_id = events.trace_id
    where events.phase <> 'M'
        and events.ts_us + members.shift_us <= $end_us
        and coalesce(events.end_us, events.ts_us) + members.shift_us >= $start_us
),
names as (
    select trace_id, name, pid, tid, json_extract_string(args, '$.name') as label
    from events
    where phase = 'M' and name in ('process_name', 'thread_name') and trace_id in (select trace_id from members)
),
named_threads as (
    select
        threads.rank, threads.trace_id, threads.pid, threads.tid,
        coalesce(any_value(process_names.label), 'process ' || threads.pid) || ' / '
            || coalesce(any_value(thread_names.label), 'thread ' || threads.tid) as lane_name
    from (select distinct rank, trace_id, pid, tid from timed) as threads
    left join names as process_names
        on process_names.trace_id = threads.trace_id and process_names.name = 'process_name'
        and process_names.pid = threads.pid
    left join names as thread_names
        on thread_names.trace_id = threads.trace_id and thread_names.name = 'thread_name'
        and thread_names.pid = threads.pid and thread_names.tid = threads.tid
    group by threads.rank, threads.trace_id, threads.pid, threads.tid
),
lanes as (
    select
        *,
        row_number() over (
            partition by rank
            order by try_cast(pid as bigint) nulls last, pid, try_cast(tid as bigint) nulls last, tid
        ) as lane
    from named_threads
),
flows as (
    select rank, flow_id, dense_rank() over (order by rank, flow_id) as job_flow_id
    from (select distinct rank, flow_id from timed where flow_id is not null)
),
trace_events as (
    select
        timed.rank, timed.ts_us, timed.event_idx,
        case
            when timed.phase = 'X' then json_object(
                'ph', 'X', 'cat', coalesce(timed.category, ''), 'name', coalesce(timed.name, ''), 'pid', timed.rank,
                'tid', lanes.lane, 'ts', timed.ts_us, 'dur', coalesce(timed.dur_us, 0), 'args', coalesce(timed.args, '{}')::json)
            when timed.phase in ('s', 't', 'f') then json_object(
                'ph', timed.phase, 'cat', coalesce(timed.category, ''), 'name', coalesce(timed.name, ''),
                'pid', timed.rank, 'tid', lanes.lane, 'ts', timed.ts_us, 'id', flows.job_flow_id, 'bp', 'e')
            else json_object(
                'ph', timed.phase, 'cat', coalesce(timed.category, ''), 'name', coalesce(timed.name, ''), 'pid', timed.rank,
                'tid', lanes.lane, 'ts', timed.ts_us, 's', 't', 'args', coalesce(timed.args, '{}')::json)
        end as event
    from timed
    inner join lanes
        on lanes.rank = timed.rank and lanes.pid is not distinct from timed.pid and lanes.tid is not distinct from timed.tid
    left join flows on flows.rank = timed.rank and flows.flow_id = timed.flow_id
),
metadata as (
    select rank, -2 as ts_us, 0 as event_idx,
        json_object('ph', 'M', 'name', 'process_name', 'pid', rank, 'tid', 0, 'args', json_object('name', 'rank ' || rank))
            as event
    from members
    union all
    select rank, -2, 1, json_object('ph', 'M', 'name', 'process_sort_index', 'pid', rank, 'tid', 0,
                                    'args', json_object('sort_index', rank))
    from members
    union all
    select rank, -1, lane, json_object('ph', 'M', 'name', 'thread_name', 'pid', rank, 'tid', lane,
                                       'args', json_object('name', lane_name))
    from lanes
    union all
    select rank, -1, lane, json_object('ph', 'M', 'name', 'thread_sort_index', 'pid', rank, 'tid', lane,
                                       'args', json_object('sort_index', lane))
    from lanes
)
select
    (select count(*) from trace_events) as event_count,
    (select count(distinct rank) from trace_events) as rank_count,
    string_agg(event::varchar, ',' order by rank, ts_us, event_idx) as events
from (select * from metadata union all select * from trace_events)
"""

JOB_SPAN_SQL = """
select jobs.epoch_us, jobs.clock_method, jobs.clock_uncertainty_us,
    min(events.ts_us + job_ranks.base_time_us - jobs.epoch_us
        - coalesce(case when job_clock_offsets.applied then job_clock_offsets.offset_us end, 0)) as start_us,
    max(coalesce(events.end_us, events.ts_us) + job_ranks.base_time_us - jobs.epoch_us
        - coalesce(case when job_clock_offsets.applied then job_clock_offsets.offset_us end, 0)) as end_us
from jobs
inner join job_ranks on job_ranks.job_id = jobs.job_id
inner join events on events.trace_id = job_ranks.trace_id and events.phase <> 'M'
left join job_clock_offsets on job_clock_offsets.job_id = job_ranks.job_id and job_clock_offsets.node_id = job_ranks.node_id
where jobs.job_id = $job
group by all
"""


@dataclass(frozen=True)
class JobExport:
    text: str  # the Chrome-trace JSON
    window: Window  # on the job clock, cut to the job's span
    event_count: int
    rank_count: int


def job_trace(con: duckdb.DuckDBPyConnection, job_id: str, window: Window | None) -> JobExport:
    """The job's events in `window` (job-clock µs since its epoch; None: the whole job) as one Chrome
    trace: pid = rank (process "rank r"), the ranks' clocks aligned as the job's collectives are."""
    span = con.execute(JOB_SPAN_SQL, {"job": job_id}).fetchone()
    if span is None or span[3] is None:
        raise TraceLakeError(f"job {job_id} has no timed event: there is nothing to export")
    epoch_us, clock_method, uncertainty_us, span_start, span_end = span
    if clock_method == "unaligned":
        raise TraceLakeError(f"job {job_id}'s rank clocks could not be aligned (jobs.clock_method unaligned): its ranks "
                             "cannot share one timeline; export each rank's trace on its own")
    chosen = window or Window(span_start, span_end, "whole job")
    start, end = max(chosen.start_us, span_start), min(chosen.end_us, span_end)
    if end <= start:
        raise TraceLakeError(f"--window {chosen.start_us:g}:{chosen.end_us:g} holds none of job {job_id}, whose events "
                             f"span {span_start:.3f}:{span_end:.3f} (job-clock microseconds since its epoch)")
    cut = Window(start, end, chosen.label)
    row = con.execute(JOB_EVENTS_SQL, {"job": job_id, "start_us": start, "end_us": end}).fetchone()
    if row is None or not row[0]:
        raise TraceLakeError(f"no event of job {job_id} lies in {start:.1f}-{end:.1f} us (job clock)")
    header = json.dumps({"job_id": job_id, "window": cut.label, "start_us": start, "end_us": end, "epoch_us": epoch_us,
                         "clock": "job clock: base_time_us + ts - the node's applied offset, us since epoch_us",
                         "clock_method": clock_method, "clock_uncertainty_us": uncertainty_us})
    text = (f'{{"traceEvents":[{row[2]}],"displayTimeUnit":"ms","baseTimeNanoseconds":{int(epoch_us) * 1000},'
            f'"tracelake_export":{header}}}')
    return JobExport(text=text, window=cut, event_count=int(row[0]), rank_count=int(row[1]))
