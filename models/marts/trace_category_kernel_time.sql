{#- GPU kernel time per category of each trace, every GPU kernel counted once, so a trace's rows
    add up to its kernel time (the dashboard's charts, `compare`'s categories, the job ranks): the
    op categories of ops_summary_by_category (kernels under the op that launched them), one
    `collectives` row (every communication kernel, linked or not: that table leaves them out), and
    each other kernel no op categorizes (no linked launch, e.g. the MI300X resnet's 7.8 ms of convs,
    norms and copies) under its kernel_taxonomy category (memcpy, memset, CONV, ...), or var
    unlinked_kernel_category when no taxonomy rule names it. A view. -#}
{{ config(materialized='view') }}

with category_time as (
    select * from {{ ref('ops_summary_by_category') }}
),

kernels as (
    select * from {{ ref('kernels') }}
),

op_categorized_kernels as (
    select * from {{ ref('int_kernel_op_categories') }}
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
        case when kernels.kernel_category = 'other' then '{{ var("unlinked_kernel_category") }}'
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
