

with host_ops as (
    select * from "warehouse"."intermediate"."int_host_ops_merged"
),

fwd_bwd_links as (
    select * from "warehouse"."intermediate"."int_fwd_bwd_links"
),

final as (
    select
        host_ops.trace_id || ':' || host_ops.event_idx as op_key,
        host_ops.trace_id,
        host_ops.event_idx as op_id,
        host_ops.name,
        host_ops.ts_us,
        host_ops.dur_us,
        host_ops.end_us,
        host_ops.pid,
        host_ops.tid,
        host_ops.cpu_parent_idx as parent_id,
        host_ops.cpu_depth as depth,
        host_ops.parent_idx as parent_event_idx,
        host_ops.in_tree,
        host_ops.is_cpu_root,
        host_ops.external_id,
        host_ops.input_dims,
        host_ops.input_type,
        host_ops.input_strides,
        host_ops.concrete_inputs,
        host_ops.sequence_number,
        host_ops.fwd_thread_id,
        host_ops.record_function_id,
        host_ops.module_chain,
        case when host_ops.is_backward then 'bwd' else 'fwd' end as pass,
        backward_of.fwd_op_id as forward_op_id,
        forward_of.bwd_op_id as backward_op_id
    from host_ops
    left join fwd_bwd_links as backward_of
        on host_ops.trace_id = backward_of.trace_id
        and host_ops.event_idx = backward_of.bwd_op_id
    left join (
        select trace_id, fwd_op_id, min(bwd_op_id) as bwd_op_id
        from fwd_bwd_links
        group by trace_id, fwd_op_id
    ) as forward_of
        on host_ops.trace_id = forward_of.trace_id
        and host_ops.event_idx = forward_of.fwd_op_id
    where host_ops.category = 'cpu_op'
)

select * from final
