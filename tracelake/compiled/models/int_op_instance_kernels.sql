

with instances as (
    select trace_id, unified_op_key, op_id, is_synthetic
    from "warehouse"."intermediate"."int_unified_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

kernels as (
    select trace_id, event_idx, enclosing_cpu_op_id
    from "warehouse"."main"."kernels"
    where is_linked and trace_id in ('@@NEW_TRACE_IDS@@')
),

ancestors as (
    select * from "warehouse"."intermediate"."int_cpu_op_ancestors"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

subtree_kernels as (
    select instances.trace_id, instances.unified_op_key, kernels.event_idx
    from instances
    inner join ancestors
        on instances.trace_id = ancestors.trace_id
        and instances.op_id = ancestors.ancestor_op_id
    inner join kernels
        on ancestors.trace_id = kernels.trace_id
        and ancestors.op_id = kernels.enclosing_cpu_op_id
    where not instances.is_synthetic
),

synthetic_kernels as (
    select
        trace_id,
        unified_op_key,
        cast(split_part(unified_op_key, ':k', 2) as bigint) as event_idx
    from instances
    where is_synthetic
),

final as (
    select * from subtree_kernels
    union all
    select * from synthetic_kernels
)

select * from final
