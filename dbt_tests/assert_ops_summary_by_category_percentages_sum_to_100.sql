{#- ops_summary_by_category: the percentages of a trace's op categories add up to 100
    (1e-6 tolerance). Returns the traces that break this. -#}
with categories as (
    select * from {{ ref('ops_summary_by_category') }}
),

per_trace as (
    select
        trace_id,
        count(*) as category_count,
        sum(percentage) as percentage_sum
    from categories
    group by trace_id
)

select *
from per_trace
where percentage_sum is null
    or abs(percentage_sum - 100) > 1e-6
