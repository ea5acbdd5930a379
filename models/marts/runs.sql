{#- One row per trace, labelled for comparing runs: the model / run / commit / mode / platform
    tags (mode and platform fall back to what the trace shows) next to the GPU time breakdown
    and the profiler steps. "Every inference trace of model X on MI300X" is one filter. A view. -#}
{{ config(materialized='view') }}

with traces as (
    select * from {{ ref('traces') }}
),

timelines as (
    select * from {{ ref('gpu_timeline') }}
),

passes as (
    select * from {{ ref('int_trace_passes') }}
),

steps as (
    select
        trace_id,
        count(*) as profiler_step_count,
        median(kernel_time_ms) as median_step_kernel_time_ms
    from {{ ref('profiler_steps') }}
    group by trace_id
),

final as (
    select
        traces.trace_id,
        traces.file_name,
        traces.ingested_at,
        traces.tags['model'] as model,
        traces.tags['run'] as run,
        traces.tags['commit'] as commit,
        coalesce(
            traces.tags['mode'],
            case
                when coalesce(passes.backward_op_count, 0) > 0 then 'training'
                when traces.gpu_event_count > 0 and traces.cpu_op_count > 0 then 'inference'
            end
        ) as mode,
        case
            when traces.tags['mode'] is not null then 'tag'
            when coalesce(passes.backward_op_count, 0) > 0 or (traces.gpu_event_count > 0 and traces.cpu_op_count > 0)
                then 'detected'
            else 'unknown'
        end as mode_source,
        -- a trace without GPU work ran on no GPU platform (traces.platform is only a roofline default)
        coalesce(
            traces.tags['platform'],
            case when traces.platform_detected or traces.gpu_event_count > 0 then traces.platform end
        ) as platform,
        traces.device_name,
        traces.tags,
        traces.quality_verdict,
        timelines.total_time_ms,
        timelines.busy_time_ms,
        timelines.computation_time_ms,
        timelines.exposed_comm_time_ms,
        timelines.exposed_memcpy_time_ms,
        timelines.idle_time_ms,
        timelines.computation_time_percent,
        timelines.exposed_comm_time_percent,
        timelines.exposed_memcpy_time_percent,
        timelines.idle_time_percent,
        coalesce(steps.profiler_step_count, 0) as profiler_step_count,
        steps.median_step_kernel_time_ms
    from traces
    left join timelines on traces.trace_id = timelines.trace_id
    left join passes on traces.trace_id = passes.trace_id
    left join steps on traces.trace_id = steps.trace_id
)

select * from final
