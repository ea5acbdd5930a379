{#- Direct kernel time of each kernel launcher per op category its kernels count under
    (int_kernel_op_categories): one row for an op's launcher, one per category for a compiled
    region that launches kernels itself. The category summaries (ops_summary_by_category and its
    module variant) add these rows up, so every kernel is counted under its own category. -#}
{{ config(materialized='incremental') }}

with kernel_categories as (
    select * from {{ ref('int_kernel_op_categories') }}
    where {{ is_new_trace() }}
),

category_intervals as (
    select trace_id, launcher_event_idx, op_category, ts_us as start_us, end_us from kernel_categories
),

merged_intervals as (
    {{ merge_intervals('category_intervals', ['trace_id', 'launcher_event_idx', 'op_category']) }}
),

direct_time as (
    select trace_id, launcher_event_idx, op_category, sum(merged_end_us - merged_start_us) as direct_kernel_time_us
    from merged_intervals
    group by trace_id, launcher_event_idx, op_category
),

kernel_counts as (
    select trace_id, launcher_event_idx, op_category, count(*) as kernel_count,
        bool_or(is_compiled_region_kernel) as is_compiled_region
    from kernel_categories
    group by trace_id, launcher_event_idx, op_category
),

final as (
    select
        direct_time.trace_id || ':' || direct_time.launcher_event_idx || ':' || direct_time.op_category as launcher_category_key,
        direct_time.trace_id,
        direct_time.launcher_event_idx,
        direct_time.op_category,
        kernel_counts.kernel_count,
        kernel_counts.is_compiled_region,
        direct_time.direct_kernel_time_us
    from direct_time
    inner join kernel_counts
        on direct_time.trace_id = kernel_counts.trace_id
        and direct_time.launcher_event_idx = kernel_counts.launcher_event_idx
        and direct_time.op_category = kernel_counts.op_category
)

select * from final
