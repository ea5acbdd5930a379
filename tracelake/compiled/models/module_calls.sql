

with module_frames as (
    select * from "warehouse"."intermediate"."int_module_frames"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_module_call_ancestors"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

call_events as (
    select * from "warehouse"."main"."module_call_events"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

kernels as (
    -- a replayed kernel counts where its graph launch was issued (the module frames are the replay's)
    select * replace (coalesce(graph_launch_event_idx, launch_event_idx) as launch_event_idx)
    from "warehouse"."main"."kernels"
    where is_linked and trace_id in ('@@NEW_TRACE_IDS@@')
),

call_tree as (
    select
        ancestors.trace_id,
        ancestors.module_call_id,
        max(ancestors.distance) as depth,
        max(case when ancestors.distance = 1 then ancestors.ancestor_call_id end) as parent_module_call_id,
        array_agg(outer_calls.module_class order by ancestors.distance desc) as module_chain
    from ancestors
    inner join module_frames as outer_calls
        on ancestors.trace_id = outer_calls.trace_id
        and ancestors.ancestor_call_id = outer_calls.module_call_id
    group by ancestors.trace_id, ancestors.module_call_id
),

-- every GPU event with each call it was launched within: the innermost call of its launch and
-- the calls enclosing that one
kernels_in_calls as (
    select
        kernels.trace_id,
        ancestors.ancestor_call_id as module_call_id,
        kernels.event_idx,
        kernels.ts_us,
        kernels.dur_us,
        kernels.end_us
    from kernels
    inner join call_events
        on kernels.trace_id = call_events.trace_id
        and kernels.launch_event_idx = call_events.event_idx
    inner join ancestors
        on call_events.trace_id = ancestors.trace_id
        and call_events.module_call_id = ancestors.module_call_id
),

call_kernels as (
    select
        trace_id,
        module_call_id,
        count(*) as kernel_count,
        sum(dur_us) as kernel_time_us,
        arg_min(event_idx, (ts_us, event_idx)) as first_kernel_event_idx,
        min(ts_us) as first_kernel_ts_us,
        arg_max(event_idx, (ts_us, event_idx)) as last_kernel_event_idx,
        max(ts_us) as last_kernel_ts_us,
        arg_max(end_us, (ts_us, event_idx)) as last_kernel_end_us
    from kernels_in_calls
    group by trace_id, module_call_id
),

final as (
    select
        module_frames.trace_id || ':' || module_frames.module_call_id as module_call_key,
        module_frames.trace_id,
        module_frames.module_call_id,
        module_frames.module_class,
        module_frames.module_instance,
        module_frames.instance_index,
        call_tree.parent_module_call_id,
        coalesce(call_tree.depth, 0) as depth,
        coalesce(call_tree.module_chain, [module_frames.module_class]) as module_chain,
        module_frames.pid,
        module_frames.tid,
        module_frames.ts_us,
        module_frames.dur_us,
        module_frames.end_us,
        coalesce(call_kernels.kernel_count, 0) as kernel_count,
        coalesce(call_kernels.kernel_time_us, 0.0) as kernel_time_us,
        call_kernels.first_kernel_event_idx,
        call_kernels.first_kernel_ts_us,
        call_kernels.last_kernel_event_idx,
        call_kernels.last_kernel_ts_us,
        call_kernels.last_kernel_end_us
    from module_frames
    left join call_tree
        on module_frames.trace_id = call_tree.trace_id
        and module_frames.module_call_id = call_tree.module_call_id
    left join call_kernels
        on module_frames.trace_id = call_kernels.trace_id
        and module_frames.module_call_id = call_kernels.module_call_id
)

select * from final
