

with launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

per_name as (
    select
        trace_id,
        name,
        count(*) as op_count,
        sum(direct_kernel_time_us) as total_direct_kernel_time_us,
        sum(subtree_kernel_time_us) as total_subtree_kernel_time_us,
        list(distinct op_category order by op_category) as op_categories,
        min(launcher_event_idx) as first_op_id
    from launchers
    group by trace_id, name
),

final as (
    select
        trace_id || ':' || name as op_name_key,
        trace_id,
        name,
        op_count,
        total_direct_kernel_time_us,
        total_subtree_kernel_time_us,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        total_subtree_kernel_time_us / 1000.0 as total_subtree_kernel_time_ms,
        op_categories,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by trace_id order by total_direct_kernel_time_us desc, first_op_id
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by trace_id) as cumulative_percentage
    from per_name
)

select * from final
