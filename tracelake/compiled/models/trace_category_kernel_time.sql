

with category_time as (
    select * from "warehouse"."main"."ops_summary_by_category"
),

kernels as (
    select * from "warehouse"."main"."kernels"
),

op_categories as (
    select trace_id, op_category as category, total_direct_kernel_time_ms as kernel_time_ms
    from category_time
),

collectives as (
    select trace_id, 'collectives' as category, sum(dur_us) / 1000.0 as kernel_time_ms
    from kernels
    where is_linked and is_comm
    group by trace_id
),

final as (
    select * from op_categories
    union all
    select * from collectives
)

select * from final
