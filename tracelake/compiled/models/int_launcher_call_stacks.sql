

with launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
),

host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
),

module_call_events as (
    select * from "warehouse"."main"."module_call_events"
),

call_ancestors as (
    select * from "warehouse"."intermediate"."int_module_call_ancestors"
),

module_frames as (
    select * from "warehouse"."intermediate"."int_module_frames"
),

-- where each launcher was recorded: its own trace, or its capture trace when it was grafted
recorded_launchers as (
    select
        launchers.trace_id,
        launchers.launcher_event_idx,
        launchers.name,
        coalesce(host_ops.graph_capture_trace_id, host_ops.trace_id) as recorded_trace_id,
        host_ops.source_event_idx as recorded_event_idx
    from launchers
    inner join host_ops
        on launchers.trace_id = host_ops.trace_id
        and launchers.launcher_event_idx = host_ops.event_idx
),

enclosing_frames as (
    select
        recorded_launchers.trace_id,
        recorded_launchers.launcher_event_idx,
        call_ancestors.distance,
        module_frames.module_class,
        module_frames.module_instance
    from recorded_launchers
    inner join module_call_events
        on recorded_launchers.recorded_trace_id = module_call_events.trace_id
        and recorded_launchers.recorded_event_idx = module_call_events.event_idx
    inner join call_ancestors
        on module_call_events.trace_id = call_ancestors.trace_id
        and module_call_events.module_call_id = call_ancestors.module_call_id
    inner join module_frames
        on call_ancestors.trace_id = module_frames.trace_id
        and call_ancestors.ancestor_call_id = module_frames.module_call_id
),

-- the stack entries: the launcher itself at position 0, then its frames from the innermost out
stack_entries as (
    select trace_id, launcher_event_idx, 0 as position, name as entry
    from recorded_launchers
    union all
    select trace_id, launcher_event_idx, distance + 1 as position, 'nn.Module: ' || module_instance as entry
    from enclosing_frames
),

call_stacks as (
    select
        trace_id,
        launcher_event_idx,
        array_agg(entry order by position) as call_stack
    from stack_entries
    group by trace_id, launcher_event_idx
),

innermost_frames as (
    select trace_id, launcher_event_idx, module_class
    from enclosing_frames
    where distance = 0
),

final as (
    select
        call_stacks.trace_id,
        call_stacks.launcher_event_idx,
        launchers.name,
        launchers.op_category,
        launchers.ts_us,
        launchers.direct_kernel_time_us,
        launchers.subtree_kernel_time_us,
        coalesce('nn.Module: ' || innermost_frames.module_class, 'NA') as parent_module,
        call_stacks.call_stack
    from call_stacks
    inner join launchers
        on call_stacks.trace_id = launchers.trace_id
        and call_stacks.launcher_event_idx = launchers.launcher_event_idx
    left join innermost_frames
        on call_stacks.trace_id = innermost_frames.trace_id
        and call_stacks.launcher_event_idx = innermost_frames.launcher_event_idx
)

select * from final
