with gpu_ops as (
    select * from "warehouse"."staging"."stg_trace__gpu_ops"
),

host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
),

trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
),

flows as (
    select * from "warehouse"."staging"."stg_trace__flows"
),

flow_targets as (
    select * from "warehouse"."intermediate"."int_flow_targets"
),

runtime_calls as (
    select
        host_ops.trace_id,
        host_ops.event_idx,
        host_ops.name,
        host_ops.category,
        host_ops.launcher_op_idx,
        host_ops.cpu_parent_idx,
        host_ops.correlation,
        case trace_files.linking_key
            when 'correlation' then host_ops.correlation
            else host_ops.external_id
        end as link_id,
        host_ops.name in ('cudaGraphLaunch','hipGraphLaunch') as is_graph_launch
    from host_ops
    inner join trace_files on host_ops.trace_id = trace_files.trace_id
    where host_ops.category in ('cuda_runtime', 'cuda_driver')
),

flow_launched as (
    select
        runtime_calls.trace_id,
        flow_targets.target_event_idx as gpu_event_idx,
        runtime_calls.event_idx as launch_event_idx,
        'flow' as link_method
    from runtime_calls
    inner join flow_targets
        on runtime_calls.trace_id = flow_targets.trace_id
        and runtime_calls.link_id = flow_targets.flow_id
    where not runtime_calls.is_graph_launch
),

graph_launched as (
    select
        runtime_calls.trace_id,
        gpu_ops.event_idx as gpu_event_idx,
        runtime_calls.event_idx as launch_event_idx,
        'correlation' as link_method
    from runtime_calls
    inner join gpu_ops
        on runtime_calls.trace_id = gpu_ops.trace_id
        and runtime_calls.link_id = gpu_ops.correlation
    where runtime_calls.is_graph_launch
),

tracelens_launches as (
    select * from flow_launched
    union all
    select * from graph_launched
),

last_tracelens_launch as (
    select
        trace_id,
        gpu_event_idx,
        max(launch_event_idx) as launch_event_idx,
        arg_max(link_method, launch_event_idx) as link_method
    from tracelens_launches
    group by trace_id, gpu_event_idx
),

launch_flow_ids as (
    select distinct trace_id, flow_id
    from flows
    where is_launch_flow and flow_id is not null
),

gpu_link_ids as (
    select
        gpu_ops.trace_id,
        gpu_ops.event_idx,
        gpu_ops.correlation,
        case trace_files.linking_key
            when 'correlation' then gpu_ops.correlation
            else gpu_ops.external_id
        end as link_id
    from gpu_ops
    inner join trace_files on gpu_ops.trace_id = trace_files.trace_id
),

gpu_ops_without_flow as (
    -- GPU events that no launch flow names (by the trace's link id) and no graph launch took
    select gpu_link_ids.trace_id, gpu_link_ids.event_idx, gpu_link_ids.correlation
    from gpu_link_ids
    left join launch_flow_ids
        on gpu_link_ids.trace_id = launch_flow_ids.trace_id
        and gpu_link_ids.link_id = launch_flow_ids.flow_id
    left join last_tracelens_launch
        on gpu_link_ids.trace_id = last_tracelens_launch.trace_id
        and gpu_link_ids.event_idx = last_tracelens_launch.gpu_event_idx
    where gpu_link_ids.correlation is not null
        and launch_flow_ids.flow_id is null
        and last_tracelens_launch.gpu_event_idx is null
),

correlation_launched as (
    select
        gpu_ops_without_flow.trace_id,
        gpu_ops_without_flow.event_idx as gpu_event_idx,
        max(runtime_calls.event_idx) as launch_event_idx,
        'correlation' as link_method
    from gpu_ops_without_flow
    inner join runtime_calls
        on gpu_ops_without_flow.trace_id = runtime_calls.trace_id
        and gpu_ops_without_flow.correlation = runtime_calls.correlation
    group by gpu_ops_without_flow.trace_id, gpu_ops_without_flow.event_idx
),

all_links as (
    select * from last_tracelens_launch
    union all
    select * from correlation_launched
),

final as (
    select
        all_links.trace_id,
        all_links.gpu_event_idx,
        all_links.launch_event_idx,
        all_links.link_method,
        runtime_calls.name as launch_name,
        runtime_calls.category as launch_category,
        runtime_calls.is_graph_launch,
        runtime_calls.launcher_op_idx,
        runtime_calls.cpu_parent_idx as enclosing_cpu_op_idx
    from all_links
    inner join runtime_calls
        on all_links.trace_id = runtime_calls.trace_id
        and all_links.launch_event_idx = runtime_calls.event_idx
)

select * from final
