{#- One row per linked GPU event (kernel, memcpy, memset) launched inside a serving step
    (int_serving_steps): the event's launching runtime call lies in the step's host span (a graph
    launch's kernels all belong to the step of the launch; when spans nest, the innermost, i.e.
    latest-starting, step). GPU events launched outside every step have no row. -#}
{{ config(materialized='incremental') }}

with steps as (
    select * from {{ ref('int_serving_steps') }}
    where {{ is_new_trace() }}
),

launched_kernels as (
    select trace_id, event_idx, ts_us, end_us, launch_ts_us from {{ ref('int_kernel_host_launches') }}
    where {{ is_new_trace() }}
),

step_kernels as (
    {#- a launch at the step's first instant belongs to it even when the span is zero-length (one
        graph launch); otherwise the span is half-open so touching steps share no launch -#}
    select
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
