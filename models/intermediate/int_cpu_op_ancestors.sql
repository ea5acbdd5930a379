{#- Every cpu op paired with itself and each cpu op above it in the host call tree
    (distance 0 = itself, 1 = its cpu parent, ...). Python frames are transparent. -#}
{{ config(materialized='incremental') }}
{#- Materialized per new trace: the subtree kernel time, the unified op rows and the unified ops
    all walk it, and each recursed anew as a view. #}

with recursive cpu_ops as (
    select trace_id, event_idx as op_id, cpu_parent_idx as parent_op_id
    from {{ ref('int_host_ops_merged') }}
    where category = 'cpu_op' and in_tree and {{ is_new_trace() }}
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
