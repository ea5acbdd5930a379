

with ancestors as (
    select * from "warehouse"."intermediate"."int_cpu_op_ancestors"
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
