

with category_time as (
    select * from "warehouse"."main"."ops_summary_by_category"
),

kernels as (
    select * from "warehouse"."main"."kernels"
),

op_categorized_kernels as (
    select * from "warehouse"."intermediate"."int_kernel_op_categories"
),

op_categories as (
    select trace_id, op_category as category, total_direct_kernel_time_ms as kernel_time_ms
    from category_time
),

collectives as (
    select trace_id, 'collectives' as category, sum(dur_us) / 1000.0 as kernel_time_ms
    from kernels
    where is_comm
    group by trace_id
),

kernels_without_op as (
    select
        kernels.trace_id,
        case when kernels.kernel_category = 'other' then 'unlinked'
             else kernels.kernel_category end as category,
        sum(kernels.dur_us) / 1000.0 as kernel_time_ms
    from kernels
    left join op_categorized_kernels
        on op_categorized_kernels.trace_id = kernels.trace_id
        and op_categorized_kernels.kernel_event_idx = kernels.event_idx
    where not kernels.is_comm and op_categorized_kernels.kernel_event_idx is null
    group by all
),

all_categories as (
    select * from op_categories
    union all
    select * from collectives
    union all
    select * from kernels_without_op
),

final as (
    -- an op category and a kernel category of one name (GEMM, elementwise, reduce) are one row
    select trace_id, category, sum(kernel_time_ms) as kernel_time_ms
    from all_categories
    group by trace_id, category
)

select * from final
