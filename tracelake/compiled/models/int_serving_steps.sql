with step_annotations as (
    select * from "warehouse"."intermediate"."int_serving_step_annotations"
),

profiler_steps as (
    select * from "warehouse"."main"."profiler_steps"
),

launched_kernels as (
    select * from "warehouse"."intermediate"."int_kernel_host_launches"
),

annotation_islands as (select
        *,
        sum(case when ts_us >= coalesce(earlier_end_us, ts_us - 1) then 1 else 0 end)
            over (partition by trace_id order by ts_us, event_idx rows unbounded preceding) as island_id
    from (
        select
            *,
            max(end_us) over (
                partition by trace_id order by ts_us, event_idx rows between unbounded preceding and 1 preceding
            ) as earlier_end_us
        from step_annotations
    ) as ordered_annotations
),

ranked_annotations as (select
        *,
        min(ts_us) over (partition by trace_id, island_id) as island_start_us,
        max(end_us) over (partition by trace_id, island_id) as island_end_us,
        row_number() over (
            partition by trace_id, island_id
            order by has_attention_aggregates desc, ts_us, event_idx
        ) as annotation_rank
    from annotation_islands
),

annotated_steps as (
    select
        trace_id, 'annotation' as step_source, event_idx as annotation_event_idx, name as step_name,
        framework, island_start_us as host_start_us, island_end_us as host_end_us, phase,coalesce(context_requests + generation_requests, batch_size) as batch_size,
        c_sq, g_sq, c_sk, g_sk
    from ranked_annotations
    where annotation_rank = 1
),

profiler_step_spans as (
    select
        trace_id, 'profiler_step' as step_source, cast(null as bigint) as annotation_event_idx, step_name,
        cast(null as varchar) as framework, host_start_us, host_start_us + host_time_ms * 1000.0 as host_end_us,
        cast(null as varchar) as phase, cast(null as bigint) as batch_size,
        cast(null as bigint) as c_sq, cast(null as bigint) as g_sq, cast(null as bigint) as c_sk,
        cast(null as bigint) as g_sk
    from profiler_steps
    where trace_id not in (select trace_id from annotated_steps)
),

graph_launch_spans as (
    select
        trace_id, 'graph_launch' as step_source, cast(null as bigint) as annotation_event_idx,
        any_value(launch_name) as step_name, cast(null as varchar) as framework,
        min(launch_ts_us) as host_start_us, max(launch_end_us) as host_end_us,
        cast(null as varchar) as phase, cast(null as bigint) as batch_size,
        cast(null as bigint) as c_sq, cast(null as bigint) as g_sq, cast(null as bigint) as c_sk,
        cast(null as bigint) as g_sk
    from launched_kernels
    where is_graph_launch
        and trace_id not in (select trace_id from annotated_steps)
        and trace_id not in (select trace_id from profiler_step_spans)
    group by trace_id, launch_event_idx
),

whole_trace_spans as (
    select
        trace_id, 'whole_trace' as step_source, cast(null as bigint) as annotation_event_idx,
        'whole trace' as step_name, cast(null as varchar) as framework,
        min(launch_ts_us) as host_start_us, max(launch_end_us) as host_end_us,
        cast(null as varchar) as phase, cast(null as bigint) as batch_size,
        cast(null as bigint) as c_sq, cast(null as bigint) as g_sq, cast(null as bigint) as c_sk,
        cast(null as bigint) as g_sk
    from launched_kernels
    where trace_id not in (select trace_id from annotated_steps)
        and trace_id not in (select trace_id from profiler_step_spans)
        and trace_id not in (select trace_id from graph_launch_spans)
    group by trace_id
),

all_steps as (
    select * from annotated_steps
    union all select * from profiler_step_spans
    union all select * from graph_launch_spans
    union all select * from whole_trace_spans
),

numbered_steps as (
    select
        *,
        row_number() over (partition by trace_id order by host_start_us, annotation_event_idx) as step_index
    from all_steps
),

final as (
    select
        trace_id, step_index, step_source, step_name, annotation_event_idx, framework,
        host_start_us, host_end_us, phase, batch_size, c_sq, g_sq, c_sk, g_sk
    from numbered_steps
)

select * from final
