

with steps as (
    select * from "warehouse"."intermediate"."int_serving_steps"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

step_kernels as (
    select * from "warehouse"."main"."phase_kernels"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

window_edges as (
    select trace_id, gap_id, start_us, end_us
    from "warehouse"."main"."gpu_idle_gaps"
    where gap_class = 'window_edge' and trace_id in ('@@NEW_TRACE_IDS@@')
),

root_calls as (
    select * from "warehouse"."main"."model_root_calls"
    where trace_id in ('@@NEW_TRACE_IDS@@')
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
    from "warehouse"."intermediate"."int_gpu_intervals_merged"
    where event_scope = 'linked' and interval_set = 'all' and trace_id in ('@@NEW_TRACE_IDS@@')
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

step_gpu_spans as (select
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
            and (steps_in_phase < 3
                 or index_in_phase > 1) as in_steady_state,
        'Steady state: the first 1 step(s) of each phase are warm-up '
            || 'when the phase has at least 3 steps (fewer: all are kept); '
            || 'the window edges (time before the first step''s GPU work and after the last''s) are in no step.'
            as steady_state_rule
    from measured_steps
)

select * from final
