{#- One row per serving step of a trace (int_serving_steps: the engine's step annotations, else
    `ProfilerStep#N`, else the GPU graph launches, else the whole trace), with its phase, batch and
    tokens where the annotation shows them, the GPU span of the work it launched (phase_kernels)
    and, within that span, the GPU busy time (union of the linked GPU intervals, clipped to the
    span) and idle time. The time before the first step's GPU work and after the last step's is in
    no step: those are the profile window's edges (gpu_idle_gaps.gap_class = 'window_edge').
    Steady state: the first steady_state_warmup_steps steps of each phase are warm-up when the
    phase has at least steady_state_min_steps steps (fewer, and every step is kept: dropping one
    would leave nothing to measure); a step that launched no GPU work is never in it. -#}
{{ config(materialized='incremental') }}

with steps as (
    select * from {{ ref('int_serving_steps') }}
    where {{ is_new_trace() }}
),

step_kernels as (
    select * from {{ ref('phase_kernels') }}
    where {{ is_new_trace() }}
),

window_edges as (
    select trace_id, gap_id, start_us, end_us
    from {{ ref('gpu_idle_gaps') }}
    where gap_class = 'window_edge' and {{ is_new_trace() }}
),

root_calls as (
    select * from {{ ref('model_root_calls') }}
    where {{ is_new_trace() }}
),

busiest_models as (
    -- the model where the trace's GPU time goes (model identification's rule): its calls are the
    -- steps a diffusion request repeats (one denoising step per transformer call)
    select trace_id, arg_max(module_class, kernel_time_us) as model_class
    from (
        select trace_id, module_class, sum(kernel_time_us) as kernel_time_us
        from root_calls
        group by trace_id, module_class
    ) as model_times
    group by trace_id
),

step_model_calls as (
    select
        steps.trace_id,
        steps.step_index,
        any_value(busiest_models.model_class) as model_class,
        count(root_calls.module_call_id) as model_calls
    from steps
    inner join busiest_models
        on steps.trace_id = busiest_models.trace_id
    left join root_calls
        on steps.trace_id = root_calls.trace_id
        and root_calls.module_class = busiest_models.model_class
        and root_calls.ts_us < steps.host_end_us
        and root_calls.end_us > steps.host_start_us
    group by steps.trace_id, steps.step_index
),

merged_intervals as (
    select trace_id, merged_start_us, merged_end_us
    from {{ ref('int_gpu_intervals_merged') }}
    where event_scope = 'linked' and interval_set = 'all' and {{ is_new_trace() }}
),

launched_spans as (
    select
        trace_id,
        step_index,
        count(*) as kernel_count,
        sum(dur_us) as kernel_time_us,
        min(ts_us) as first_start_us,
        max(end_us) as last_end_us
    from step_kernels
    group by trace_id, step_index
),

step_gpu_spans as (
    {#- the first to the last GPU work the step launched, less a window-edge gap inside it (a step
        annotation can open before the profile window's first idle stretch: the SGLang decode
        step's 465 ms span holds a 463 ms window edge before its 10 ms graph replay) -#}
    select
        launched_spans.trace_id,
        launched_spans.step_index,
        any_value(launched_spans.kernel_count) as kernel_count,
        any_value(launched_spans.kernel_time_us) as kernel_time_us,
        coalesce(max(window_edges.end_us) filter (where window_edges.gap_id = 1),
                 any_value(launched_spans.first_start_us)) as gpu_start_us,
        coalesce(min(window_edges.start_us) filter (where window_edges.gap_id > 1),
                 any_value(launched_spans.last_end_us)) as gpu_end_us
    from launched_spans
    left join window_edges
        on launched_spans.trace_id = window_edges.trace_id
        and window_edges.start_us >= launched_spans.first_start_us
        and window_edges.end_us <= launched_spans.last_end_us
    group by launched_spans.trace_id, launched_spans.step_index
),

step_busy as (
    select
        step_gpu_spans.trace_id,
        step_gpu_spans.step_index,
        sum(least(merged_intervals.merged_end_us, step_gpu_spans.gpu_end_us)
            - greatest(merged_intervals.merged_start_us, step_gpu_spans.gpu_start_us)) as gpu_busy_us
    from step_gpu_spans
    inner join merged_intervals
        on step_gpu_spans.trace_id = merged_intervals.trace_id
        and merged_intervals.merged_start_us < step_gpu_spans.gpu_end_us
        and merged_intervals.merged_end_us > step_gpu_spans.gpu_start_us
    group by step_gpu_spans.trace_id, step_gpu_spans.step_index
),

measured_steps as (
    select
        steps.*,
        coalesce(step_gpu_spans.kernel_count, 0) as kernel_count,
        coalesce(step_gpu_spans.kernel_time_us, 0) as kernel_time_us,
        step_gpu_spans.gpu_start_us,
        step_gpu_spans.gpu_end_us,
        coalesce(step_busy.gpu_busy_us, 0) as gpu_busy_us,
        step_model_calls.model_class,
        coalesce(step_model_calls.model_calls, 0) as model_calls,
        coalesce(step_gpu_spans.gpu_end_us - step_gpu_spans.gpu_start_us, 0) as gpu_time_us,
        row_number() over (
            partition by steps.trace_id, coalesce(steps.phase, steps.step_source) order by steps.step_index
        ) as index_in_phase,
        count(*) over (partition by steps.trace_id, coalesce(steps.phase, steps.step_source)) as steps_in_phase
    from steps
    left join step_gpu_spans
        on steps.trace_id = step_gpu_spans.trace_id and steps.step_index = step_gpu_spans.step_index
    left join step_busy
        on steps.trace_id = step_busy.trace_id and steps.step_index = step_busy.step_index
    left join step_model_calls
        on steps.trace_id = step_model_calls.trace_id and steps.step_index = step_model_calls.step_index
),

final as (
    select
        trace_id || ':' || step_index as step_key,
        trace_id,
        step_index,
        step_source,
        step_name,
        annotation_event_idx,
        framework,
        phase,
        batch_size,
        c_sq as prefill_tokens,
        g_sq as decode_tokens,
        c_sk + g_sk as kv_tokens,
        host_start_us,
        host_end_us,
        (host_end_us - host_start_us) / 1000.0 as host_time_ms,
        gpu_start_us,
        gpu_end_us,
        kernel_count,
        kernel_time_us,
        gpu_time_us,
        gpu_busy_us,
        gpu_time_us - gpu_busy_us as gpu_idle_us,
        case when gpu_time_us > 0 then 100.0 * gpu_busy_us / gpu_time_us end as gpu_busy_percent,
        model_class,
        model_calls,
        index_in_phase,
        kernel_count > 0
            and (steps_in_phase < {{ var('steady_state_min_steps') }}
                 or index_in_phase > {{ var('steady_state_warmup_steps') }}) as in_steady_state,
        'Steady state: the first {{ var("steady_state_warmup_steps") }} step(s) of each phase are warm-up '
            || 'when the phase has at least {{ var("steady_state_min_steps") }} steps (fewer: all are kept); '
            || 'the window edges (time before the first step''s GPU work and after the last''s) are in no step.'
            as steady_state_rule
    from measured_steps
)

select * from final
