

with recursive cpu_ops as (
    select trace_id, event_idx as op_id, cpu_parent_idx as parent_op_id
    from "warehouse"."intermediate"."int_host_ops_merged"
    where category = 'cpu_op' and in_tree and trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestry as (
    select trace_id, op_id, op_id as ancestor_op_id, 0 as distance
    from cpu_ops
    union all
    select ancestry.trace_id, ancestry.op_id, cpu_ops.parent_op_id as ancestor_op_id, ancestry.distance + 1
    from ancestry
    inner join cpu_ops
        on ancestry.trace_id = cpu_ops.trace_id
        and ancestry.ancestor_op_id = cpu_ops.op_id
    where cpu_ops.parent_op_id is not null
)

select * from ancestry
