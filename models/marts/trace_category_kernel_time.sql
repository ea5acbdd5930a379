{#- GPU kernel time per category of each trace, every GPU kernel's duration counted once, so a
    trace's rows add up to its kernel time (the dashboard's charts, `compare`'s categories, the job
    ranks): a kernel an op launched under that op's category (int_kernel_op_categories, the
    categories of ops_summary_by_category), a communication kernel, linked or not, under
    `collectives` (that table leaves them out), and any other kernel (no linked launch, e.g. the
    MI300X resnet's 7.8 ms of convs, norms and copies) under its kernel_taxonomy category (memcpy,
    memset, CONV, ...), or var unlinked_kernel_category when no taxonomy rule names it. Durations
    are summed, not merged: kernels of one launcher that overlap (B200 MoE kernels do) count in
    full, as the trace's kernel time counts them. A view. -#}
{{ config(materialized='view') }}

with kernels as (
    select * from {{ ref('kernels') }}
),

op_categorized_kernels as (
    select * from {{ ref('int_kernel_op_categories') }}
),

categorized_kernels as (
    select
        kernels.trace_id,
        case
            when kernels.is_comm then 'collectives'
            when op_categorized_kernels.kernel_event_idx is not null then op_categorized_kernels.op_category
            when kernels.kernel_category = 'other' then '{{ var("unlinked_kernel_category") }}'
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
