

with kernel_categories as (
    select * from "warehouse"."intermediate"."int_kernel_op_categories"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

category_intervals as (
    select trace_id, launcher_event_idx, op_category, ts_us as start_us, end_us from kernel_categories
),

merged_intervals as (
    select
        trace_id, launcher_event_idx, op_category,
        min(start_us) as merged_start_us,
        max(end_us) as merged_end_us
    from (
        select
            *,
            sum(starts_group) over (
                partition by trace_id, launcher_event_idx, op_category
                order by start_us, end_us
                rows between unbounded preceding and current row
            ) as merged_group_id
        from (
            select
                *,
                case
                    when max(end_us) over (
                        partition by trace_id, launcher_event_idx, op_category
                        order by start_us, end_us
                        rows between unbounded preceding and 1 preceding
                    ) >= start_us then 0
                    else 1
                end as starts_group
            from category_intervals
        ) as flagged
    ) as grouped
    group by trace_id, launcher_event_idx, op_category, merged_group_id
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
