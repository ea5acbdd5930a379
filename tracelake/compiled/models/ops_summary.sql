

with launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launcher_categories as (
    -- the categories its kernels count under (several for a compiled region launching them itself)
    select * from "warehouse"."intermediate"."int_launcher_category_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

categories_per_name as (
    select launchers.trace_id, launchers.name,
        list(distinct launcher_categories.op_category order by launcher_categories.op_category) as op_categories
    from launchers
    inner join launcher_categories
        on launchers.trace_id = launcher_categories.trace_id
        and launchers.launcher_event_idx = launcher_categories.launcher_event_idx
    group by launchers.trace_id, launchers.name
),

per_name as (
    select
        trace_id,
        name,
        count(*) as op_count,
        sum(direct_kernel_time_us) as total_direct_kernel_time_us,
        sum(subtree_kernel_time_us) as total_subtree_kernel_time_us,
        min(launcher_event_idx) as first_op_id
    from launchers
    group by trace_id, name
),

final as (
    select
        per_name.trace_id || ':' || per_name.name as op_name_key,
        per_name.trace_id,
        per_name.name,
        op_count,
        total_direct_kernel_time_us,
        total_subtree_kernel_time_us,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        total_subtree_kernel_time_us / 1000.0 as total_subtree_kernel_time_ms,
        categories_per_name.op_categories,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by per_name.trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by per_name.trace_id order by total_direct_kernel_time_us desc, first_op_id
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by per_name.trace_id) as cumulative_percentage
    from per_name
    inner join categories_per_name
        on per_name.trace_id = categories_per_name.trace_id
        and per_name.name = categories_per_name.name
)

select * from final
