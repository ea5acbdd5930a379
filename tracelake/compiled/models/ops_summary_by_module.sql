

with launchers_in_modules as (
    select * from "warehouse"."intermediate"."int_launcher_call_stacks"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launcher_categories as (
    select * from "warehouse"."intermediate"."int_launcher_category_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

categories_per_name_and_module as (
    -- the categories its kernels count under (several for a compiled region launching them itself)
    select
        launchers_in_modules.trace_id,
        launchers_in_modules.name,
        launchers_in_modules.parent_module,
        list(distinct launcher_categories.op_category order by launcher_categories.op_category) as op_categories
    from launchers_in_modules
    inner join launcher_categories
        on launchers_in_modules.trace_id = launcher_categories.trace_id
        and launchers_in_modules.launcher_event_idx = launcher_categories.launcher_event_idx
    group by launchers_in_modules.trace_id, launchers_in_modules.name, launchers_in_modules.parent_module
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
        -- TraceLens sorts the launchers by start time and keeps the first call stack
        arg_min(call_stack, (ts_us, launcher_event_idx)) as call_stack_first,
        min(launcher_event_idx) as first_op_id
    from launchers_in_modules
    group by trace_id, name, parent_module
),

final as (
    select
        per_name_and_module.trace_id || ':' || per_name_and_module.name || ':' || per_name_and_module.parent_module as op_module_key,
        per_name_and_module.trace_id,
        per_name_and_module.name,
        per_name_and_module.parent_module,
        op_count,
        subtree_kernel_time_count,
        total_direct_kernel_time_us,
        total_subtree_kernel_time_us,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        total_subtree_kernel_time_us / 1000.0 as total_subtree_kernel_time_ms,
        categories_per_name_and_module.op_categories,
        call_stack_first,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by per_name_and_module.trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by per_name_and_module.trace_id order by total_direct_kernel_time_us desc, first_op_id
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by per_name_and_module.trace_id) as cumulative_percentage
    from per_name_and_module
    inner join categories_per_name_and_module
        on per_name_and_module.trace_id = categories_per_name_and_module.trace_id
        and per_name_and_module.name = categories_per_name_and_module.name
        and per_name_and_module.parent_module = categories_per_name_and_module.parent_module
)

select * from final
