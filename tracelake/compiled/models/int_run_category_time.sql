with run_groups as (
    select * from "warehouse"."main"."run_groups"
),

category_time as (
    select * from "warehouse"."main"."trace_category_kernel_time"
),

final as (
    select
        run_groups.group_key,
        run_groups.run_index,
        category_time.category as op_category,
        sum(category_time.kernel_time_ms) / any_value(run_groups.run_gpu_trace_count) as kernel_time_ms
    from run_groups
    inner join category_time on category_time.trace_id = run_groups.trace_id
    where run_groups.has_gpu_timeline
    group by run_groups.group_key, run_groups.run_index, category_time.category
)

select * from final
