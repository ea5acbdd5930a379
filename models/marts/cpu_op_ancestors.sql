{#- Every in-tree cpu op paired with itself and each cpu op above it (the op ancestry analyzers
    read instead of walking cpu_ops.parent_id). A view. -#}
{{ config(materialized='view') }}

with ancestors as (
    select * from {{ ref('int_cpu_op_ancestors') }}
),

final as (
    select
        trace_id,
        op_id,
        ancestor_op_id,
        distance
    from ancestors
)

select * from final
