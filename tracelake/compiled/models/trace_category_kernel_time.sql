

with kernels as (
    select * from "warehouse"."main"."kernels"
),

op_categorized_kernels as (
    select * from "warehouse"."intermediate"."int_kernel_op_categories"
),

categorized_kernels as (
    select
        kernels.trace_id,
        case
            when kernels.is_comm then 'collectives'
            when op_categorized_kernels.kernel_event_idx is not null then op_categorized_kernels.op_category
            when kernels.kernel_category = 'other' then 'unlinked'
            else kernels.kernel_category
        end as category,
        kernels.dur_us
    from kernels
    left join op_categorized_kernels
        on op_categorized_kernels.trace_id = kernels.trace_id
        and op_categorized_kernels.kernel_event_idx = kernels.event_idx
),

final as (
    select trace_id, category, sum(dur_us) / 1000.0 as kernel_time_ms
    from categorized_kernels
    group by trace_id, category
)

select * from final
