{#- TraceLens' inference ops_summary_by_category (`--group_by_parent_module`): kernel time of
    launcher ops per op category and parent module, with the call stack of the group's first
    instance. Percentages are of the trace's summed launcher kernel time. -#}
{{ config(materialized='incremental') }}

with launchers as (
    select * from {{ ref('int_kernel_launchers') }}
    where {{ is_new_trace() }}
),

call_stacks as (
    select * from {{ ref('int_launcher_call_stacks') }}
    where {{ is_new_trace() }}
),

launchers_in_modules as (
    select
        launchers.trace_id,
        launchers.launcher_event_idx,
        launchers.op_category,
        launchers.ts_us,
        launchers.direct_kernel_time_us,
        call_stacks.parent_module,
        call_stacks.call_stack
    from launchers
    inner join call_stacks
        on launchers.trace_id = call_stacks.trace_id
        and launchers.launcher_event_idx = call_stacks.launcher_event_idx
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
    from launchers_in_modules
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
