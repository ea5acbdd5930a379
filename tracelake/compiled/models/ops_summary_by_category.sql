

with launcher_categories as (
    select * from "warehouse"."intermediate"."int_launcher_category_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

per_category as (
    select
        trace_id,
        op_category,
        count(*) as op_count,
        sum(direct_kernel_time_us) as total_direct_kernel_time_us
    from launcher_categories
    group by trace_id, op_category
),

final as (
    select
        trace_id || ':' || op_category as category_key,
        trace_id,
        op_category,
        op_count,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by trace_id order by total_direct_kernel_time_us desc, op_category
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by trace_id) as cumulative_percentage
    from per_category
)

select * from final
