

with gpu_ops as (
    select * from "warehouse"."staging"."stg_trace__gpu_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launches as (
    select * from "warehouse"."intermediate"."int_gpu_ops_linked_to_launches"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

kernel_map as (
    select * from "warehouse"."main"."graph_kernel_map"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

captured_launches as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
    where graph_capture_trace_id is not null and trace_id in ('@@NEW_TRACE_IDS@@')
),

kernel_classes as (
    select * from "warehouse"."intermediate"."int_kernel_names_classified"
),

cpu_ops as (
    select trace_id, event_idx, name from "warehouse"."intermediate"."int_host_ops_merged"
    where category = 'cpu_op' and trace_id in ('@@NEW_TRACE_IDS@@')
),

final as (
    select
        gpu_ops.trace_id || ':' || gpu_ops.event_idx as kernel_key,
        gpu_ops.trace_id,
        gpu_ops.event_idx,
        gpu_ops.category,
        gpu_ops.name,
        gpu_ops.ts_us,
        gpu_ops.dur_us,
        gpu_ops.end_us,
        gpu_ops.pid,
        gpu_ops.tid,
        gpu_ops.device,
        gpu_ops.stream,
        gpu_ops.correlation,
        gpu_ops.external_id,
        gpu_ops.bytes,
        gpu_ops.grid,
        gpu_ops.block,
        gpu_ops.gpu_bucket,
        gpu_ops.gpu_bucket = 'communication' as is_comm,
        coalesce(kernel_classes.kernel_type, 'unknown') as kernel_type,
        coalesce(kernel_classes.category, 'other') as kernel_category,
        coalesce(kernel_classes.library, 'unknown') as library,
        nullif(kernel_classes.precision, '') as kernel_precision,
        launches.launch_event_idx is not null as is_linked,
        case when captured.event_idx is not null then 'graph_capture'
             else coalesce(launches.link_method, 'none') end as link_method,
        coalesce(captured.event_idx, launches.launch_event_idx) as launch_event_idx,
        coalesce(captured.name, launches.launch_name) as launch_name,
        coalesce(captured.category, launches.launch_category) as launch_category,
        coalesce(launches.is_graph_launch, false) as is_graph_launch,
        case when coalesce(launches.is_graph_launch, false) then launches.launch_event_idx end as graph_launch_event_idx,
        kernel_map.capture_trace_id,
        case when captured.event_idx is not null then captured.launcher_op_idx
             else launches.launcher_op_idx end as cpu_op_id,
        cpu_ops.name as cpu_op_name,
        case when captured.event_idx is not null then captured.cpu_parent_idx
             else launches.enclosing_cpu_op_idx end as enclosing_cpu_op_id,
        coalesce(captured.launcher_op_idx, captured.event_idx, launches.launcher_op_idx, launches.launch_event_idx)
            as launcher_event_idx
    from gpu_ops
    left join launches
        on gpu_ops.trace_id = launches.trace_id
        and gpu_ops.event_idx = launches.gpu_event_idx
    left join kernel_map
        on gpu_ops.trace_id = kernel_map.trace_id
        and gpu_ops.event_idx = kernel_map.gpu_event_idx
    left join captured_launches as captured
        on kernel_map.trace_id = captured.trace_id
        and kernel_map.dispatch_event_idx + kernel_map.graft_offset = captured.event_idx
    left join kernel_classes on gpu_ops.name = kernel_classes.name
    left join cpu_ops
        on gpu_ops.trace_id = cpu_ops.trace_id
        and case when captured.event_idx is not null then captured.launcher_op_idx
                 else launches.launcher_op_idx end = cpu_ops.event_idx
)

select * from final
