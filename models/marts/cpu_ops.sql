{#- One row per cpu_op event with its place in the rebuilt host call tree. A view. -#}
{{ config(materialized='view') }}

with host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
),

final as (
    select
        trace_id || ':' || event_idx as op_key,
        trace_id,
        event_idx as op_id,
        name,
        ts_us,
        dur_us,
        end_us,
        pid,
        tid,
        cpu_parent_idx as parent_id,
        cpu_depth as depth,
        parent_idx as parent_event_idx,
        in_tree,
        is_cpu_root,
        external_id,
        input_dims,
        input_type,
        input_strides,
        concrete_inputs,
        sequence_number,
        fwd_thread_id,
        record_function_id,
        module_chain,
        case when is_backward then 'bwd' else 'fwd' end as pass
    from host_ops
    where category = 'cpu_op'
)

select * from final
