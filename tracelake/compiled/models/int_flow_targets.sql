with link_ids as (
    select * from "warehouse"."intermediate"."int_link_ids"
),

flows as (
    select * from "warehouse"."staging"."stg_trace__flows"
),

flow_starts as (
    select distinct trace_id, flow_id
    from flows
    where is_launch_flow and phase = 's' and flow_id is not null
),

flow_ends as (
    select
        trace_id,
        flow_id,
        arg_max(pid, event_idx) as pid,
        arg_max(tid, event_idx) as tid
    from flows
    where is_launch_flow and phase = 'f' and flow_id is not null
    group by trace_id, flow_id
),

landing_events as (
    -- joined before grouping: only the events on a flow end's thread that carry its id are kept
    select
        flow_ends.trace_id,
        flow_ends.flow_id,
        max(link_ids.event_idx) as target_event_idx
    from flow_ends
    inner join flow_starts
        on flow_ends.trace_id = flow_starts.trace_id
        and flow_ends.flow_id = flow_starts.flow_id
    inner join link_ids
        on flow_ends.trace_id = link_ids.trace_id
        and flow_ends.pid = link_ids.pid
        and flow_ends.tid = link_ids.tid
        and flow_ends.flow_id = link_ids.link_id
    where link_ids.has_args
    group by flow_ends.trace_id, flow_ends.flow_id
)

select * from landing_events
