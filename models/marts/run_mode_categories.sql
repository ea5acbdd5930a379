{#- Training vs inference per model and platform: each side's categories by kernel time
    (trace_category_kernel_time: every GPU kernel once), the mean per trace and the share of the side's kernel time,
    ranked largest first. A view. -#}
{{ config(materialized='view') }}

with run_groups as (
    select * from {{ ref('run_groups') }}
),

category_time as (
    select * from {{ ref('trace_category_kernel_time') }}
),

sides as (
    select
        model,
        group_platform,
        split_part(mode, '-', 1) as mode,  -- training-graph is training
        trace_id,
        count(*) over (partition by model, group_platform, split_part(mode, '-', 1)) as trace_count
    from run_groups
    where has_gpu_timeline and split_part(mode, '-', 1) in ('training', 'inference')
),

side_categories as (
    select
        sides.model,
        sides.group_platform,
        sides.mode,
        category_time.category as op_category,
        sum(category_time.kernel_time_ms) / any_value(sides.trace_count) as mean_kernel_time_ms,
        sum(category_time.kernel_time_ms) as side_kernel_time_ms
    from sides
    inner join category_time on category_time.trace_id = sides.trace_id
    group by sides.model, sides.group_platform, sides.mode, category_time.category
),

final as (
    select
        model,
        group_platform,
        mode,
        op_category,
        mean_kernel_time_ms,
        100 * side_kernel_time_ms
            / nullif(sum(side_kernel_time_ms) over (partition by model, group_platform, mode), 0) as percent,
        row_number() over (
            partition by model, group_platform, mode order by side_kernel_time_ms desc, op_category
        ) as category_rank
    from side_categories
)

select * from final
