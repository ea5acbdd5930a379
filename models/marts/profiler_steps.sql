{#- One row per trace and profiler step (`ProfilerStep#N` annotations): the step's host span, the
    linked GPU work it launched (the launching runtime call lies inside the step's host span, matched
    by correlation: kernels.launch_event_idx) and that work's GPU span, first start to last end.
    The profiler's GPU-side `ProfilerStep#N` annotation is kept as recorded but is not the step's GPU
    span: on CUDA Kineto draws it over the step's kernels, on ROCm it is a marker of a few µs where
    the step's GPU work begins (MI300X resnet: 16 µs against 22.8 ms of kernels). Repeated steps of
    one trace are what `tracelake compare` measures noise with. -#}
{{ config(materialized='incremental') }}

with annotations as (
    select * from {{ ref('stg_trace__events') }}
    where {{ is_new_trace() }}
        and category in ('user_annotation', 'gpu_user_annotation')
        and {{ regex_search('name', "'^ProfilerStep#[0-9]+$'") }}
        and dur_us is not null
),

launched_kernels as (
    select trace_id, event_idx, ts_us, end_us, dur_us, launch_ts_us from {{ ref('int_kernel_host_launches') }}
    where {{ is_new_trace() }}
),

step_spans as (
    select
        trace_id,
        cast(split_part(name, '#', 2) as bigint) as step_number,
        min(ts_us) filter (where category = 'user_annotation') as host_start_us,
        max(end_us) filter (where category = 'user_annotation') as host_end_us,
        min(ts_us) filter (where category = 'gpu_user_annotation') as gpu_annotation_start_us,
        max(end_us) filter (where category = 'gpu_user_annotation') as gpu_annotation_end_us
    from annotations
    group by all
),

steps as (
    select * from step_spans
    where host_start_us is not null
),

step_kernels as (
    select
        steps.trace_id,
        steps.step_number,
        count(launched_kernels.event_idx) as kernel_count,
        coalesce(sum(launched_kernels.dur_us), 0) as kernel_time_us,
        min(launched_kernels.ts_us) as gpu_start_us,
        max(launched_kernels.end_us) as gpu_end_us
    from steps
    left join launched_kernels
        on launched_kernels.trace_id = steps.trace_id
        and launched_kernels.launch_ts_us >= steps.host_start_us
        and launched_kernels.launch_ts_us < steps.host_end_us
    group by all
),

final as (
    select
        steps.trace_id,
        steps.step_number,
        'ProfilerStep#' || steps.step_number as step_name,
        steps.host_start_us,
        (steps.host_end_us - steps.host_start_us) / 1000.0 as host_time_ms,
        step_kernels.gpu_start_us,
        (step_kernels.gpu_end_us - step_kernels.gpu_start_us) / 1000.0 as gpu_time_ms,
        steps.gpu_annotation_start_us,
        (steps.gpu_annotation_end_us - steps.gpu_annotation_start_us) / 1000.0 as gpu_annotation_time_ms,
        least(steps.host_start_us, coalesce(step_kernels.gpu_start_us, steps.host_start_us)) as span_start_us,
        greatest(steps.host_end_us, coalesce(step_kernels.gpu_end_us, steps.host_end_us)) as span_end_us,
        step_kernels.kernel_count,
        step_kernels.kernel_time_us / 1000.0 as kernel_time_ms
    from steps
    inner join step_kernels
        on steps.trace_id = step_kernels.trace_id
        and steps.step_number = step_kernels.step_number
)

select * from final
