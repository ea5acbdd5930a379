{#- Each op instance of the unified perf table paired with every linked GPU event it owns: a cpu
    op owns the GPU events launched anywhere in its host subtree (as its kernel time counts
    them), a synthetic op the one GPU event its key names. -#}
{{ config(materialized='incremental') }}

with instances as (
    select trace_id, unified_op_key, op_id, is_synthetic
    from {{ ref('int_unified_ops') }}
    where {{ is_new_trace() }}
),

kernels as (
    select trace_id, event_idx, enclosing_cpu_op_id
    from {{ ref('kernels') }}
    where is_linked and {{ is_new_trace() }}
),

ancestors as (
    select * from {{ ref('int_cpu_op_ancestors') }}
    where {{ is_new_trace() }}
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
