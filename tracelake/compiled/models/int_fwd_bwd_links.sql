with host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
    where category = 'cpu_op' and sequence_number is not null
),

backward_nodes as (
    select trace_id, event_idx as bwd_op_id, sequence_number, pid, tid
    from host_ops
    where name like 'autograd::engine::evaluate_function:%'
),

forward_candidates as (
    select
        backward_nodes.trace_id,
        backward_nodes.bwd_op_id,
        host_ops.event_idx as fwd_op_id,
        row_number() over (
            partition by backward_nodes.trace_id, backward_nodes.bwd_op_id
            order by host_ops.ts_us desc, host_ops.event_idx desc
        ) as candidate_rank
    from backward_nodes
    inner join host_ops
        on backward_nodes.trace_id = host_ops.trace_id
        and backward_nodes.sequence_number = host_ops.sequence_number
        and (host_ops.pid is distinct from backward_nodes.pid or host_ops.tid is distinct from backward_nodes.tid)
),

final as (
    select trace_id, bwd_op_id, fwd_op_id
    from forward_candidates
    where candidate_rank = 1
)

select * from final
