{#- Which host runtime call launched each GPU event (TraceLens add_gpu_ops_to_tree):
    graph launches take every GPU event sharing their correlation; any other runtime call takes
    the event its ac2g flow lands on. When several calls claim one GPU event, the last one in
    file order wins, as in TraceLens. -#}
with gpu_ops as (
    select * from {{ ref('stg_trace__gpu_ops') }}
),

host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
),

trace_files as (
    select * from {{ ref('stg_trace__files') }}
),

flow_targets as (
    select * from {{ ref('int_flow_targets') }}
),

runtime_calls as (
    select
        host_ops.trace_id,
        host_ops.event_idx,
        host_ops.name,
        host_ops.category,
        host_ops.launcher_op_idx,
        host_ops.cpu_parent_idx,
        case trace_files.linking_key
            when 'correlation' then host_ops.correlation
            else host_ops.external_id
        end as link_id,
        host_ops.name in (
            {%- for name in var('graph_launch_names') %}'{{ name }}'{{ "," if not loop.last }}{% endfor -%}
        ) as is_graph_launch
    from host_ops
    inner join trace_files on host_ops.trace_id = trace_files.trace_id
    where host_ops.category in ('cuda_runtime', 'cuda_driver')
),

flow_launched as (
    select
        runtime_calls.trace_id,
        flow_targets.target_event_idx as gpu_event_idx,
        runtime_calls.event_idx as launch_event_idx
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
        runtime_calls.event_idx as launch_event_idx
    from runtime_calls
    inner join gpu_ops
        on runtime_calls.trace_id = gpu_ops.trace_id
        and runtime_calls.link_id = gpu_ops.correlation
    where runtime_calls.is_graph_launch
),

all_launches as (
    select * from flow_launched
    union all
    select * from graph_launched
),

last_launch as (
    select
        trace_id,
        gpu_event_idx,
        max(launch_event_idx) as launch_event_idx
    from all_launches
    group by trace_id, gpu_event_idx
),

final as (
    select
        last_launch.trace_id,
        last_launch.gpu_event_idx,
        last_launch.launch_event_idx,
        runtime_calls.name as launch_name,
        runtime_calls.category as launch_category,
        runtime_calls.is_graph_launch,
        runtime_calls.launcher_op_idx,
        runtime_calls.cpu_parent_idx as enclosing_cpu_op_idx
    from last_launch
    inner join runtime_calls
        on last_launch.trace_id = runtime_calls.trace_id
        and last_launch.launch_event_idx = runtime_calls.event_idx
)

select * from final
