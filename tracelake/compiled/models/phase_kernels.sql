

with steps as (
    select * from "warehouse"."intermediate"."int_serving_steps"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

launched_kernels as (
    select trace_id, event_idx, ts_us, end_us, launch_ts_us from "warehouse"."intermediate"."int_kernel_host_launches"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

step_kernels as (select
        steps.trace_id,
        steps.step_index,
        launched_kernels.event_idx,
        launched_kernels.ts_us,
        launched_kernels.end_us,
        row_number() over (
            partition by launched_kernels.trace_id, launched_kernels.event_idx
            order by steps.host_start_us desc
        ) as innermost_rank
    from steps
    inner join launched_kernels
        on steps.trace_id = launched_kernels.trace_id
        and launched_kernels.launch_ts_us >= steps.host_start_us
        and (launched_kernels.launch_ts_us < steps.host_end_us
             or launched_kernels.launch_ts_us = steps.host_start_us)
),

final as (
    select
        step_kernels.trace_id || ':' || step_kernels.event_idx as kernel_key,
        step_kernels.trace_id,
        step_kernels.event_idx,
        step_kernels.step_index,
        steps.phase,
        step_kernels.ts_us,
        step_kernels.end_us,
        step_kernels.end_us - step_kernels.ts_us as dur_us
    from step_kernels
    inner join steps
        on step_kernels.trace_id = steps.trace_id
        and step_kernels.step_index = steps.step_index
    where step_kernels.innermost_rank = 1
)

select * from final
