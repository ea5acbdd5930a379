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

detected as (
    -- what the trace shows: a backward pass means training; serving-engine ops, graph replays or
    -- GPU work launched by cpu ops without a backward pass mean inference
    select
        traces.trace_id,
        case
            when coalesce(passes.backward_op_count, 0) > 0 then 'training'
            when coalesce(passes.serving_engine_op_count, 0) > 0 or coalesce(passes.graph_launch_count, 0) > 0
                or (traces.gpu_event_count > 0 and traces.cpu_op_count > 0) then 'inference'
        end as purpose,
        coalesce(passes.graph_launch_count, 0) > 0 as is_graph_replay
    from traces
    left join passes on traces.trace_id = passes.trace_id
),

final as (
    select
        traces.trace_id,
        traces.file_name,
        traces.ingested_at,
        traces.tags['model'] as model,
        traces.tags['run'] as run,
        traces.tags['commit'] as commit,
        coalesce(split_part(traces.tags['mode'], '-', 1), detected.purpose)
            || case when traces.tags['mode'] like '%-graph' or detected.is_graph_replay then '-graph' else '' end
            as mode,
        case
            when traces.tags['mode'] is not null then 'tag'
            when detected.purpose is not null then 'detected'
            else 'unknown'
        end as mode_source,
        case
            when traces.tags['mode'] is not null then 'the mode tag'
            when detected.purpose = 'training' then passes.backward_op_count || ' backward-pass ops'
            when passes.serving_engine_op_count > 0
                then passes.serving_engine_op_count || ' inference ops of serving engines or their kernel libraries (e.g. ' || passes.serving_engine_op_example || ')'
            when detected.is_graph_replay then passes.graph_launch_count || ' GPU graph launches and no backward pass'
            when detected.purpose = 'inference' then 'GPU work launched by cpu ops and no backward pass'
            else 'no cpu ops with GPU work'
        end
            || case
                when detected.is_graph_replay and detected.purpose is not null
                    then '; ' || passes.graph_launch_count || ' GPU graph launches (graph replay)'
                else ''
            end as mode_reason,
        -- an assumed roofline platform is no label: a device the seed does not know is named as the
        -- trace names it, and a trace naming no device ran on a platform nobody knows
        coalesce(
            traces.tags['platform'],
            case when traces.platform_source = 'trace device' then traces.platform end,
            traces.device_name
        ) as platform,
        case when traces.tags['platform'] is not null then 'tag' else traces.platform_source end as platform_source,
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
    left join detected on traces.trace_id = detected.trace_id
    left join steps on traces.trace_id = steps.trace_id
)

select * from final
