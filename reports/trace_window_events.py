"""Which events of a stored trace an export of a window holds, and the trace's own header.

A window of time (a finding's, START:END) holds every event that overlaps it and the host side of
its GPU work: the runtime / driver call that launched each GPU event of the window (by correlation:
kernels.launch_event_idx) and the host events that enclose that call on its thread (the cpu_op and
user_annotation stack it came from), however long before the window the host ran it. A profiler step
holds its host side (the events overlapping its host span) and the GPU work that side launched, so a
GPU still busy with the previous step's kernels does not pass them off as this step's. Either way a
flow arrow is written only when all its events are (a launch's `s` and its kernel's `f`): Perfetto
then draws no arrow that ends without a start.

The header is the source file's top-level keys (trace_headers: deviceProperties, distributedInfo,
runtime versions, traceName, ...), so the exported trace is the same device and job when it is opened
or ingested again."""

from __future__ import annotations

import json
from typing import Any

import duckdb

# Every event the export holds, in the trace's order: $host_start/$host_end bound the host side,
# $gpu_start/$gpu_end the GPU side; $by_launch (a step) takes the linked GPU events whose launch lies
# in the host span instead of those overlapping the GPU span.
WINDOW_EVENTS_SQL = """
with trace_events as (
    select event_idx, phase, category, name, ts_us, dur_us, end_us, pid, tid, flow_id, args
    from events
    where trace_id = $trace_id
),
gpu_events as (
    select kernels.event_idx, kernels.ts_us, kernels.end_us, launch_calls.event_idx as launch_event_idx,
        launch_calls.ts_us as launch_ts_us
    from kernels
    left join trace_events as launch_calls
        on launch_calls.event_idx = coalesce(kernels.graph_launch_event_idx, kernels.launch_event_idx)
    where kernels.trace_id = $trace_id
),
gpu_side as (
    select event_idx from gpu_events
    union all
    select event_idx from trace_events where category = 'gpu_user_annotation'
),
chosen_gpu as (
    select event_idx, launch_event_idx from gpu_events
    where case
        when $by_launch and launch_ts_us is not null then launch_ts_us >= $host_start and launch_ts_us < $host_end
        else ts_us <= $gpu_end and end_us >= $gpu_start
    end
    union all
    select event_idx, null from trace_events
    where category = 'gpu_user_annotation' and ts_us <= $gpu_end and coalesce(end_us, ts_us) >= $gpu_start
),
host_in_window as (
    select event_idx from trace_events
    where phase not in ('M', 's', 't', 'f') and event_idx not in (select event_idx from gpu_side)
        and ts_us <= $host_end and coalesce(end_us, ts_us) >= $host_start
),
outside_launches as (
    select trace_events.*
    from trace_events
    where event_idx in (select launch_event_idx from chosen_gpu)
        and event_idx not in (select event_idx from host_in_window)
),
launch_stacks as (
    select distinct enclosing.event_idx
    from outside_launches
    inner join trace_events as enclosing
        on enclosing.pid is not distinct from outside_launches.pid
        and enclosing.tid is not distinct from outside_launches.tid
        and enclosing.phase = 'X'
        and enclosing.ts_us <= outside_launches.ts_us
        and enclosing.end_us >= outside_launches.end_us
),
chosen as (
    select event_idx from chosen_gpu
    union select event_idx from host_in_window
    union select event_idx from outside_launches
    union select event_idx from launch_stacks
),
chosen_slices as (
    select trace_events.event_idx, trace_events.pid, trace_events.tid, trace_events.ts_us, trace_events.end_us
    from trace_events
    where trace_events.event_idx in (select event_idx from chosen) and trace_events.phase = 'X'
),
flow_events as (
    select event_idx, phase, category, flow_id, pid, tid, ts_us
    from trace_events
    where phase in ('s', 't', 'f') and flow_id is not null
        and ts_us between (select min(ts_us) from chosen_slices) and (select max(end_us) from chosen_slices)
),
anchored_flow_events as (
    -- a flow event binds to the slice of its thread it lies in (Kineto writes it at that slice's start)
    select flow_events.event_idx, flow_events.phase, flow_events.category, flow_events.flow_id,
        chosen_slices.end_us >= flow_events.ts_us as anchored
    from flow_events
    asof left join chosen_slices
        on chosen_slices.pid = flow_events.pid
        and chosen_slices.tid = flow_events.tid
        and chosen_slices.ts_us <= flow_events.ts_us
),
whole_flows as (
    select category, flow_id from anchored_flow_events
    group by category, flow_id
    having bool_and(coalesce(anchored, false)) and count(*) filter (where phase = 's') > 0
        and count(*) filter (where phase = 'f') > 0
),
exported as (
    select event_idx from chosen
    union select anchored_flow_events.event_idx from anchored_flow_events
        inner join whole_flows
            on whole_flows.flow_id = anchored_flow_events.flow_id
            and whole_flows.category is not distinct from anchored_flow_events.category
    union select event_idx from trace_events where phase = 'M'
),
critical_nodes as (
    -- with $critical_path: the nodes of the critical_path mart (a node on two steps' paths: the first)
    select node_idx, arg_min(predecessor_idx, step_number) as predecessor_idx, min(step_number) as step_number,
        arg_min(binding_edge, step_number) as binding_edge, arg_min(lag_us, step_number) as lag_us
    from critical_path
    where $critical_path and trace_id = $trace_id
    group by node_idx
),
exported_events as (
    select
        trace_events.event_idx, trace_events.phase, trace_events.category, trace_events.name, trace_events.ts_us,
        trace_events.dur_us, trace_events.pid, trace_events.tid, trace_events.flow_id,
        case
            when critical_nodes.node_idx is null then trace_events.args
            else json_merge_patch(coalesce(trace_events.args, '{}'), json_object('critical_path', json_object(
                'step', critical_nodes.step_number, 'binding_edge', critical_nodes.binding_edge,
                'lag_us', critical_nodes.lag_us)))::varchar
        end as args
    from trace_events
    left join critical_nodes on critical_nodes.node_idx = trace_events.event_idx
    where trace_events.event_idx in (select event_idx from exported)
),
critical_links as (
    -- an arrow from each exported critical node's binding predecessor to it, ids past the trace's own
    select
        predecessors.event_idx as predecessor_idx, predecessors.ts_us as predecessor_ts_us,
        predecessors.pid as predecessor_pid, predecessors.tid as predecessor_tid,
        nodes.event_idx as node_idx, nodes.ts_us as node_ts_us, nodes.pid as node_pid, nodes.tid as node_tid,
        (select coalesce(max(flow_id), 0) from trace_events) + row_number() over (order by nodes.event_idx) as link_id
    from critical_nodes
    inner join exported_events as nodes on nodes.event_idx = critical_nodes.node_idx and nodes.phase = 'X'
    inner join exported_events as predecessors
        on predecessors.event_idx = critical_nodes.predecessor_idx and predecessors.phase = 'X'
),
export_rows as (
    select event_idx, 0 as part, phase, category, name, ts_us, dur_us, pid, tid, flow_id, args from exported_events
    union all
    select predecessor_idx, 1, 's', 'tracelake.critical_path', 'critical path', predecessor_ts_us, null,
        predecessor_pid, predecessor_tid, link_id, null
    from critical_links
    union all
    select node_idx, 2, 'f', 'tracelake.critical_path', 'critical path', node_ts_us, null, node_pid, node_tid,
        link_id, null
    from critical_links
)
select phase, category, name, ts_us, dur_us, pid, tid, flow_id, args
from export_rows
order by event_idx, part
"""

HEADER_SQL = "select header_json, ts_base_us from trace_headers where trace_id = ?"


def window_event_rows(con: duckdb.DuckDBPyConnection, trace_id: str, gpu_span: tuple[float, float],
                      host_span: tuple[float, float] | None, critical_path: bool = False) -> list[tuple[Any, ...]]:
    """The rows (phase, category, name, ts, dur, pid, tid, flow id, args) of the events an export holds:
    with `host_span` (a step) its host side and the GPU work launched from it, else the events
    overlapping `gpu_span` and the host side of its GPU work. With `critical_path`, the exported nodes
    of the critical_path mart carry `args.critical_path` (step, binding edge, lag) and an arrow from
    their binding predecessor (category `tracelake.critical_path`), so Perfetto draws the chain."""
    host = host_span or gpu_span
    return con.execute(WINDOW_EVENTS_SQL, {
        "trace_id": trace_id, "gpu_start": gpu_span[0], "gpu_end": gpu_span[1], "host_start": host[0],
        "host_end": host[1], "by_launch": host_span is not None, "critical_path": critical_path}).fetchall()


def trace_header(con: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, Any]:
    """The source's top-level keys (deviceProperties, distributedInfo, versions, ...) as stored. A trace
    on an absolute clock is stored less its base (ingest/exact_time.py): its events are written relative
    to the base and the base goes out as Kineto's own baseTimeNanoseconds (in place of any the source
    had: such traces write epoch µs and have none), so the trace's clock is written exactly."""
    row = con.execute(HEADER_SQL, [trace_id]).fetchone()
    header: dict[str, Any] = json.loads(row[0]) if row is not None and row[0] else {}
    base_us = int(row[1]) if row is not None and row[1] else 0
    if base_us:
        header["baseTimeNanoseconds"] = base_us * 1000
    return header


def trace_id_value(value: str | None) -> int | str | None:
    """A pid / tid as the trace had it (stored as text): numbers as numbers."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return value
