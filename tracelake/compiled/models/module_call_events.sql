

with host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

module_frames as (
    select * from "warehouse"."intermediate"."int_module_frames"
    where end_us > ts_us and trace_id in ('@@NEW_TRACE_IDS@@')
),

host_events as (
    select trace_id, pid, tid, event_idx, category, ts_us
    from host_ops
    where category <> 'python_function'
),

boundaries as (
    select
        trace_id, pid, tid, ts_us as at_us, 1 as kind, -end_us as tie_us, module_call_id as tie_idx,
        1 as step, module_call_id, cast(null as bigint) as event_idx, cast(null as varchar) as category
    from module_frames
    union all
    select
        trace_id, pid, tid, end_us as at_us, 0 as kind, -ts_us as tie_us, -module_call_id as tie_idx,
        -1 as step, cast(null as bigint) as module_call_id, cast(null as bigint) as event_idx,
        cast(null as varchar) as category
    from module_frames
    union all
    select
        trace_id, pid, tid, ts_us as at_us, 2 as kind, 0 as tie_us, event_idx as tie_idx,
        0 as step, cast(null as bigint) as module_call_id, event_idx, category
    from host_events
),

open_calls as (
    select
        *,
        sum(step) over (
            partition by trace_id, pid, tid
            order by at_us, kind, tie_us, tie_idx
            rows between unbounded preceding and current row
        ) as open_call_count
    from boundaries
),

-- a frame start sits at its own depth (open calls before it); an event looks up the level of the
-- innermost open call
leveled as (
    select *, open_call_count - 1 as level
    from open_calls
    where kind <> 0
),

innermost_calls as (
    select
        trace_id,
        event_idx,
        category,
        level,
        last_value(module_call_id ignore nulls) over (
            partition by trace_id, pid, tid, level
            order by at_us, kind, tie_us, tie_idx
            rows between unbounded preceding and current row
        ) as module_call_id
    from leveled
),

final as (
    select
        trace_id || ':' || event_idx as module_call_event_key,
        trace_id,
        event_idx,
        category,
        module_call_id
    from innermost_calls
    where event_idx is not null and level >= 0
)

select * from final
