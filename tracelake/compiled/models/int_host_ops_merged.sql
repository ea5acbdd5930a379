with host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
),

kernel_map as (
    select * from "warehouse"."main"."graph_kernel_map"
),

dispatches as (
    select * from "warehouse"."intermediate"."int_graph_capture_dispatches"
),

grafted_roots as (
    -- one row per graph launch the merge mapped: its capture root's span and its graft offset
    select distinct
        kernel_map.trace_id,
        kernel_map.graph_launch_event_idx,
        kernel_map.capture_trace_id,
        kernel_map.graft_offset,
        dispatches.root_start_us,
        dispatches.root_end_us,
        dispatches.root_pid,
        dispatches.root_tid
    from kernel_map
    inner join dispatches
        on kernel_map.capture_trace_id = dispatches.capture_trace_id
        and kernel_map.capture_root_ordinal = dispatches.root_ordinal
),

graph_launches as (
    select trace_id, event_idx, ts_us, dur_us, end_us, pid, tid, cpu_parent_idx
    from host_ops
    where (trace_id, event_idx) in (select (trace_id, graph_launch_event_idx) from grafted_roots)
),

dispatch_ids as (
    select distinct capture_trace_id, dispatch_event_idx from dispatches
),

captured_events as (
    -- the capture root's ops and its GPU-work dispatches, on the capturing thread (python frames are
    -- not grafted: each op already carries its module chain)
    select
        grafted_roots.trace_id as replay_trace_id,
        grafted_roots.graph_launch_event_idx,
        grafted_roots.graft_offset,
        grafted_roots.root_start_us,
        grafted_roots.root_end_us,
        host_ops.*
    from grafted_roots
    inner join host_ops
        on grafted_roots.capture_trace_id = host_ops.trace_id
        and grafted_roots.root_pid = host_ops.pid
        and grafted_roots.root_tid = host_ops.tid
        and host_ops.ts_us >= grafted_roots.root_start_us
        and host_ops.end_us <= grafted_roots.root_end_us
    left join dispatch_ids
        on host_ops.trace_id = dispatch_ids.capture_trace_id
        and host_ops.event_idx = dispatch_ids.dispatch_event_idx
    where host_ops.category = 'cpu_op' or dispatch_ids.dispatch_event_idx is not null
),

captured_ids as (
    select distinct trace_id, event_idx from captured_events
),

grafted as (
    select
        captured_events.replay_trace_id as trace_id,
        captured_events.event_idx + captured_events.graft_offset as event_idx,
        captured_events.category,
        captured_events.name,
        graph_launches.ts_us,
        graph_launches.dur_us,
        graph_launches.end_us,
        graph_launches.pid,
        graph_launches.tid,
        captured_events.correlation,
        captured_events.external_id,
        captured_events.input_dims,
        captured_events.input_type,
        captured_events.input_strides,
        captured_events.concrete_inputs,
        captured_events.sequence_number,
        captured_events.fwd_thread_id,
        captured_events.record_function_id,
        captured_events.in_tree,
        case when parent_ids.event_idx is not null
             then captured_events.parent_idx + captured_events.graft_offset end as parent_idx,
        captured_events.depth,
        case when cpu_parent_ids.event_idx is not null
             then captured_events.cpu_parent_idx + captured_events.graft_offset end as cpu_parent_idx,
        captured_events.cpu_depth,
        captured_events.is_cpu_root or cpu_parent_ids.event_idx is null as is_cpu_root,
        case when launcher_ids.event_idx is not null
             then captured_events.launcher_op_idx + captured_events.graft_offset end as launcher_op_idx,
        captured_events.is_backward,
        captured_events.module_chain,
        captured_events.trace_id as graph_capture_trace_id,
        captured_events.event_idx as source_event_idx
    from captured_events
    inner join graph_launches
        on captured_events.replay_trace_id = graph_launches.trace_id
        and captured_events.graph_launch_event_idx = graph_launches.event_idx
    left join captured_ids as parent_ids
        on captured_events.trace_id = parent_ids.trace_id
        and captured_events.parent_idx = parent_ids.event_idx
    left join captured_ids as cpu_parent_ids
        on captured_events.trace_id = cpu_parent_ids.trace_id
        and captured_events.cpu_parent_idx = cpu_parent_ids.event_idx
    left join captured_ids as launcher_ids
        on captured_events.trace_id = launcher_ids.trace_id
        and captured_events.launcher_op_idx = launcher_ids.event_idx
),

own as (
    select *, null::varchar as graph_capture_trace_id, event_idx as source_event_idx from host_ops
),

final as (
    select * from own
    union all by name
    select * from grafted
)

select * from final
