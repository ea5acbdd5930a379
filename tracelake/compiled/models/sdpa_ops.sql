

with op_perf as (
    select * from "warehouse"."main"."op_perf"
),

owned_categories as (
    select category from "warehouse"."main"."agent_categories"
    where category_kind = 'op' and agent = 'sdpa'
),

final as (
    select *
    from op_perf
    where is_trace_platform and op_category in (select category from owned_categories)
)

select * from final
