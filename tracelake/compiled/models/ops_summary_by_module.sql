

with launchers_in_modules as (
    select * from "warehouse"."intermediate"."int_launcher_call_stacks"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

per_name_and_module as (
    select
        trace_id,
        name,
        parent_module,
        count(*) as op_count,
        count(subtree_kernel_time_us) as subtree_kernel_time_count,
        sum(direct_kernel_time_us) as total_direct_kernel_time_us,
        sum(subtree_kernel_time_us) as total_subtree_kernel_time_us,
        list(distinct op_category order by op_category) as op_categories,
        -- TraceLens sorts the launchers by start time and keeps the first call stack
        arg_min(call_stack, (ts_us, launcher_event_idx)) as call_stack_first,
        min(launcher_event_idx) as first_op_id
    from launchers_in_modules
    group by trace_id, name, parent_module
),

final as (
    select
        trace_id || ':' || name || ':' || parent_module as op_module_key,
        trace_id,
        name,
        parent_module,
        op_count,
        subtree_kernel_time_count,
        total_direct_kernel_time_us,
        total_subtree_kernel_time_us,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        total_subtree_kernel_time_us / 1000.0 as total_subtree_kernel_time_ms,
        op_categories,
        call_stack_first,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by trace_id order by total_direct_kernel_time_us desc, first_op_id
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by trace_id) as cumulative_percentage
    from per_name_and_module
)

select * from final
