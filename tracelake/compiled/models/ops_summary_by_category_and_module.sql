

with launchers_in_modules as (
    select * from "warehouse"."intermediate"."int_launcher_call_stacks"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launcher_categories as (
    select * from "warehouse"."intermediate"."int_launcher_category_time"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launcher_category_rows as (
    -- one row per launcher and the op category its kernels count under (several for a compiled
    -- region launching kernels itself)
    select
        launchers_in_modules.trace_id,
        launchers_in_modules.launcher_event_idx,
        launchers_in_modules.ts_us,
        launchers_in_modules.parent_module,
        launchers_in_modules.call_stack,
        launcher_categories.op_category,
        launcher_categories.direct_kernel_time_us
    from launchers_in_modules
    inner join launcher_categories
        on launchers_in_modules.trace_id = launcher_categories.trace_id
        and launchers_in_modules.launcher_event_idx = launcher_categories.launcher_event_idx
),

per_category_and_module as (
    select
        trace_id,
        op_category,
        parent_module,
        count(*) as op_count,
        sum(direct_kernel_time_us) as total_direct_kernel_time_us,
        -- TraceLens sorts the launchers by start time and keeps the first call stack
        arg_min(call_stack, (ts_us, launcher_event_idx)) as call_stack_first
    from launcher_category_rows
    group by trace_id, op_category, parent_module
),

final as (
    select
        trace_id || ':' || op_category || ':' || parent_module as category_module_key,
        trace_id,
        op_category,
        parent_module,
        op_count,
        call_stack_first,
        total_direct_kernel_time_us / 1000.0 as total_direct_kernel_time_ms,
        100.0 * total_direct_kernel_time_us / sum(total_direct_kernel_time_us) over (partition by trace_id) as percentage,
        100.0 * sum(total_direct_kernel_time_us) over (
            partition by trace_id order by total_direct_kernel_time_us desc, op_category, parent_module
            rows between unbounded preceding and current row
        ) / sum(total_direct_kernel_time_us) over (partition by trace_id) as cumulative_percentage
    from per_category_and_module
)

select * from final
