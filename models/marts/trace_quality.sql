{#- One row per trace and quality check: value, threshold, verdict (pass|info|warn|fail). -#}
{{ config(materialized='incremental') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
    where {{ is_new_trace() }}
),

ingest_checks as (
    select * from {{ ref('stg_trace__ingest_checks') }}
    where {{ is_new_trace() }}
),

kernels as (
    select * from {{ ref('kernels') }}
    where {{ is_new_trace() }}
),

host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
    where {{ is_new_trace() }}
),

events as (
    select trace_id, phase, ts_us, dur_us, end_us from {{ ref('stg_trace__events') }}
    where {{ is_new_trace() }}
),

all_events_timeline as (
    select * from {{ ref('gpu_timeline_all_events') }}
    where {{ is_new_trace() }}
),

profiler_steps as (
    select * from {{ ref('profiler_steps') }}
    where {{ is_new_trace() }}
),

trace_platforms as (
    select * from {{ ref('int_trace_platforms') }}
    where {{ is_new_trace() }}
),

unrecognized_device as (
    {#- events that look like device work in a category ingest does not read (ingest check) -#}
    select trace_id, value as events, detail
    from ingest_checks
    where check_name = 'unrecognized_device_events' and value > 0
),

gpu_stats as (
    select
        trace_files.trace_id,
        count(kernels.event_idx) as gpu_events,
        count(kernels.event_idx) filter (where not kernels.is_linked) as unlinked_gpu_events,
        count(kernels.event_idx) filter (
            where kernels.link_method = 'correlation' or kernels.is_graph_launch
        ) as correlation_linked_gpu_events,
        count(kernels.event_idx) filter (where kernels.is_graph_launch) as graph_replayed_gpu_events,
        count(kernels.event_idx) filter (where kernels.link_method = 'graph_capture') as graph_merged_gpu_events,
        count(distinct kernels.capture_trace_id) as graph_capture_traces,
        count(kernels.event_idx) filter (
            where kernels.link_method = 'correlation' and not kernels.is_graph_launch
        ) as flowless_linked_gpu_events,
        coalesce(sum(kernels.dur_us) filter (where not kernels.is_linked), 0) as unlinked_gpu_time_us,
        coalesce(sum(kernels.dur_us), 0) as gpu_time_us,
        coalesce(sum(kernels.dur_us) filter (where kernels.is_linked), 0) as linked_gpu_time_us,
        count(kernels.event_idx) filter (where kernels.is_comm) as comm_events,
        count(kernels.event_idx) filter (where kernels.name like 'triton\_%' escape '\') as triton_kernels
    from trace_files
    left join kernels on trace_files.trace_id = kernels.trace_id
    group by trace_files.trace_id
),

host_stats as (
    select
        trace_files.trace_id,
        count(host_ops.event_idx) filter (where host_ops.category = 'cpu_op') as cpu_ops,
        count(host_ops.event_idx) filter (
            where host_ops.name in (
                {%- for name in var('graph_launch_names') %}'{{ name }}'{{ "," if not loop.last }}{% endfor -%}
            )
        ) as graph_launches,
        count(host_ops.event_idx) filter (
            where {% for prefix in var('graph_capture_name_prefixes') -%}
                host_ops.name like '{{ prefix }}%'{{ " or " if not loop.last }}
            {%- endfor %}
        ) as graph_capture_calls,
        min(host_ops.ts_us) as host_window_start_us
    from trace_files
    left join host_ops on trace_files.trace_id = host_ops.trace_id
    group by trace_files.trace_id
),

stream_order as (
    select
        trace_id,
        ts_us,
        max(end_us) over (
            partition by trace_id, pid, tid
            order by ts_us, end_us
            rows between unbounded preceding and 1 preceding
        ) as previous_end_us
    from kernels
),

same_stream_overlaps as (
    select
        trace_files.trace_id,
        count(stream_order.ts_us) filter (
            where stream_order.previous_end_us - stream_order.ts_us > {{ var('same_stream_overlap_tolerance_us') }}
        ) as overlapping_kernels
    from trace_files
    left join stream_order on trace_files.trace_id = stream_order.trace_id
    group by trace_files.trace_id
),

zero_durations as (
    select
        trace_files.trace_id,
        count(events.dur_us) filter (where events.phase = 'X' and events.dur_us = 0) as zero_duration_events
    from trace_files
    left join events on trace_files.trace_id = events.trace_id
    group by trace_files.trace_id
),

trace_spans as (
    select
        trace_files.trace_id,
        coalesce(max(events.end_us) - min(events.ts_us), 0) as span_us
    from trace_files
    left join events on trace_files.trace_id = events.trace_id and events.phase = 'X'
    group by trace_files.trace_id
),

busy_shares as (
    select
        trace_spans.trace_id,
        trace_spans.span_us,
        coalesce(all_events_timeline.busy_time_ms, 0) * 1000.0 as busy_us,
        case
            when trace_spans.span_us > 0
                then coalesce(all_events_timeline.busy_time_ms, 0) * 1000.0 / trace_spans.span_us
        end as busy_share
    from trace_spans
    left join all_events_timeline on trace_spans.trace_id = all_events_timeline.trace_id
),

step_counts as (
    select
        trace_files.trace_id,
        count(profiler_steps.step_number) as steps
    from trace_files
    left join profiler_steps on trace_files.trace_id = profiler_steps.trace_id
    group by trace_files.trace_id
),

before_window as (
    select
        host_stats.trace_id,
        count(kernels.event_idx) filter (where kernels.end_us < host_stats.host_window_start_us) as early_gpu_events
    from host_stats
    left join kernels on host_stats.trace_id = kernels.trace_id
    group by host_stats.trace_id
),

derived_checks as (
    select
        gpu_stats.trace_id,
        'gpu_events_present' as check_name,
        gpu_stats.gpu_events::double as value,
        1.0 as threshold,
        case when gpu_stats.gpu_events > 0 then 'pass' else 'fail' end as verdict,
        case
            when gpu_stats.gpu_events > 0 then gpu_stats.gpu_events || ' GPU events (kernels, memcpy, memset)'
                || coalesce('; not counted: ' || unrecognized_device.detail, '')
            when unrecognized_device.events > 0
                then 'no GPU events TraceLake reads, yet the trace holds device work: ' || unrecognized_device.detail
                    || '; only the CPU ops are analyzed'
            else 'no GPU events: a CPU-only trace; only CPU-op analysis is possible'
        end as detail
    from gpu_stats
    left join unrecognized_device on gpu_stats.trace_id = unrecognized_device.trace_id

    union all

    select
        gpu_stats.trace_id,
        'linked_gpu_time_share',
        case when gpu_stats.gpu_time_us > 0 then gpu_stats.linked_gpu_time_us / gpu_stats.gpu_time_us end,
        {{ var('min_linked_gpu_time_share') }},
        case
            when gpu_stats.gpu_time_us = 0 then 'info'
            when gpu_stats.linked_gpu_time_us / gpu_stats.gpu_time_us >= {{ var('min_linked_gpu_time_share') }} then 'pass'
            when gpu_stats.linked_gpu_time_us / gpu_stats.gpu_time_us >= {{ var('fail_linked_gpu_time_share') }} then 'warn'
            else 'fail'
        end,
        case
            when gpu_stats.gpu_time_us > 0
                and gpu_stats.linked_gpu_time_us / gpu_stats.gpu_time_us < {{ var('fail_linked_gpu_time_share') }}
                then 'mostly unlinked: only ' || round(100.0 * gpu_stats.linked_gpu_time_us / gpu_stats.gpu_time_us, 1)
                    || '% of the GPU time (' || gpu_stats.unlinked_gpu_events || ' of ' || gpu_stats.gpu_events
                    || ' GPU events unlinked) has a host launch by flow or by correlation id, so the timeline, op tables and findings describe '
                    || 'only that part; profile with flows (ac2g) or keep each GPU event''s correlation'
            else gpu_stats.unlinked_gpu_events || ' of ' || gpu_stats.gpu_events
                || ' GPU events have no host launch by flow or by correlation id (work queued before the profiling window, or neither kept); they are left out of the timeline and op tables'
        end
    from gpu_stats

    union all

    select
        trace_id,
        'correlation_linked_gpu_events',
        correlation_linked_gpu_events::double,
        0.0,
        case when flowless_linked_gpu_events > 0 then 'info' else 'pass' end,
        case
            when correlation_linked_gpu_events = 0 then 'no GPU event was linked by correlation id'
            else correlation_linked_gpu_events || ' GPU events linked to their runtime launch by correlation id: '
                || (correlation_linked_gpu_events - flowless_linked_gpu_events) || ' replayed by GPU graph launches (as TraceLens links them), '
                || flowless_linked_gpu_events || ' named by no launch flow (flows stripped or never written; TraceLens would leave these out)'
        end
    from gpu_stats

    union all

    select
        trace_id,
        'unlinked_gpu_events',
        unlinked_gpu_events::double,
        0.0,
        case when unlinked_gpu_events > 0 then 'info' else 'pass' end,
        unlinked_gpu_events || ' of ' || gpu_events || ' GPU events (' || round(unlinked_gpu_time_us / 1000.0, 3)
            || ' ms) have no host launch after linking by flow and by correlation id; linked_gpu_time_share grades their share'
    from gpu_stats

    union all

    select
        host_stats.trace_id,
        'graph_replay',
        host_stats.graph_launches::double,
        0.0,
        case
            when host_stats.graph_launches = 0 then 'pass'
            when gpu_stats.graph_replayed_gpu_events > 0
                and gpu_stats.graph_merged_gpu_events = gpu_stats.graph_replayed_gpu_events then 'info'
            else 'warn'
        end,
        case
            when host_stats.graph_launches = 0 then 'no GPU graph replay'
            when gpu_stats.graph_merged_gpu_events = 0 and replay_files.graph_capture_trace_ids is not null
                then host_stats.graph_launches || ' GPU graph launches and ' || len(replay_files.graph_capture_trace_ids)
                    || ' capture trace(s) given, but no captured graph matches a replay (graph_kernel_map is empty): the '
                    || gpu_stats.graph_replayed_gpu_events || ' replayed GPU events stay attributed to the graph launch'
            when gpu_stats.graph_merged_gpu_events = 0 then host_stats.graph_launches
                || ' GPU graph launches: their kernels are attributed to the graph launch, not to ops; give the capture traces to attribute them'
            else host_stats.graph_launches || ' GPU graph launches merged with ' || gpu_stats.graph_capture_traces
                || ' capture trace(s): ' || gpu_stats.graph_merged_gpu_events || ' of ' || gpu_stats.graph_replayed_gpu_events
                || ' replayed GPU events take their captured op, shapes and module chain (graph_kernel_map)'
                || case when gpu_stats.graph_merged_gpu_events < gpu_stats.graph_replayed_gpu_events
                        then '; the others match no captured launch and stay with the graph launch' else '' end
        end
    from host_stats
    inner join gpu_stats on host_stats.trace_id = gpu_stats.trace_id
    inner join trace_files as replay_files on host_stats.trace_id = replay_files.trace_id

    union all

    select
        trace_id,
        'compiled_kernels',
        triton_kernels::double,
        0.0,
        case when triton_kernels > 0 then 'info' else 'pass' end,
        case
            when triton_kernels > 0 then triton_kernels
                || ' Triton kernels generated by torch.compile: fused regions, not eager ops'
            else 'no compiler-generated (Triton) kernels'
        end
    from gpu_stats

    union all

    select
        host_stats.trace_id,
        'cpu_ops_present',
        host_stats.cpu_ops::double,
        1.0,
        case when host_stats.cpu_ops > 0 then 'pass' else 'warn' end,
        case
            when host_stats.cpu_ops > 0 then host_stats.cpu_ops || ' cpu ops'
            else 'no cpu ops: a GPU-only trace; kernels cannot be attributed to PyTorch ops'
        end
    from host_stats

    union all

    select
        trace_id,
        'same_stream_overlaps',
        overlapping_kernels::double,
        {{ var('same_stream_overlap_tolerance_us') }},
        case when overlapping_kernels > 0 then 'warn' else 'pass' end,
        overlapping_kernels || ' GPU events start before the previous event on their stream ends (clock or duration artifacts)'
    from same_stream_overlaps

    union all

    select
        trace_id,
        'zero_duration_events',
        zero_duration_events::double,
        0.0,
        case when zero_duration_events > 0 then 'info' else 'pass' end,
        zero_duration_events || ' complete events with zero duration'
    from zero_durations

    union all

    select
        trace_id,
        'gpu_events_before_window',
        early_gpu_events::double,
        0.0,
        case when early_gpu_events > 0 then 'warn' else 'pass' end,
        early_gpu_events || ' GPU events end before the first host event (queued work from before the profiling window)'
    from before_window

    union all

    select
        gpu_stats.trace_id,
        'distributed_info',
        case when trace_files.distributed_info is not null then 1.0 else 0.0 end,
        1.0,
        case
            when gpu_stats.comm_events > 0 and trace_files.distributed_info is null then 'warn'
            else 'pass'
        end,
        case
            when trace_files.distributed_info is not null
                then 'distributedInfo present: backend ' || coalesce(trace_files.distributed_backend, '?')
                    || ', rank ' || coalesce(trace_files.rank::varchar, '?')
                    || ' of ' || coalesce(trace_files.world_size::varchar, '?')
            when gpu_stats.comm_events > 0
                then gpu_stats.comm_events || ' collective kernels but no distributedInfo: rank and world size unknown'
            else 'single-process trace without collectives'
        end
    from gpu_stats
    inner join trace_files on gpu_stats.trace_id = trace_files.trace_id

    union all

    select
        gpu_stats.trace_id,
        'gpu_busy_share',
        busy_shares.busy_share,
        {{ var('min_gpu_busy_share') }},
        case
            when gpu_stats.gpu_events = 0 or busy_shares.busy_share is null then 'info'
            -- device work left unread makes the share a lower bound, not the sign of a harness
            when busy_shares.busy_share < {{ var('min_gpu_busy_share') }} and unrecognized_device.events > 0 then 'info'
            when busy_shares.busy_share < {{ var('min_gpu_busy_share') }} then 'warn'
            else 'pass'
        end,
        case
            when gpu_stats.gpu_events = 0 and unrecognized_device.events > 0
                then 'no GPU work TraceLake reads to measure (' || unrecognized_device.events::bigint
                    || ' unrecognized device events)'
            when gpu_stats.gpu_events = 0 or busy_shares.busy_share is null then 'no GPU work to measure'
            when busy_shares.busy_share < {{ var('min_gpu_busy_share') }} and unrecognized_device.events > 0
                then 'GPU work covers ' || round(100.0 * busy_shares.busy_share, 2) || ' % of the whole trace span '
                    || '(first to last event, host events included) counting only the '
                    || gpu_stats.gpu_events || ' GPU events TraceLake reads (' || round(busy_shares.busy_us / 1000.0, 3)
                    || ' ms in ' || round(busy_shares.span_us / 1000.0, 3) || ' ms): a lower bound, since '
                    || unrecognized_device.events::bigint || ' device events were not recognized'
            when busy_shares.busy_share < {{ var('min_gpu_busy_share') }}
                then 'GPU work covers ' || round(100.0 * busy_shares.busy_share, 2) || ' % of the whole trace span '
                    || '(first to last event, host events included: ' || round(busy_shares.busy_us / 1000.0, 3) || ' ms of GPU work in ' || round(busy_shares.span_us / 1000.0, 3)
                    || ' ms): a micro-benchmark or test harness, not a workload'
            -- not the GPU timeline's busy share, whose span is first to last GPU event (issue 28: 6.23 % here
            -- beside the timeline's 7.9 % read as one number measured twice)
            else 'GPU work covers ' || round(100.0 * busy_shares.busy_share, 2) || ' % of the whole trace span '
                || '(first to last event, host events included: ' || round(busy_shares.busy_us / 1000.0, 3)
                || ' ms of GPU work in ' || round(busy_shares.span_us / 1000.0, 3) || ' ms); the GPU timeline''s '
                || 'busy share is of its own span, first to last GPU event'
        end
    from gpu_stats
    inner join busy_shares on gpu_stats.trace_id = busy_shares.trace_id
    left join unrecognized_device on gpu_stats.trace_id = unrecognized_device.trace_id

    union all

    select
        host_stats.trace_id,
        'graph_capture',
        host_stats.graph_capture_calls::double,
        0.0,
        case
            when (host_stats.graph_capture_calls > 0 and host_stats.graph_launches = 0)
                or trace_files.source_path like '%/{{ var("capture_trace_folder") }}/%' then 'warn'
            when host_stats.graph_capture_calls > 0 then 'info'
            else 'pass'
        end,
        case
            when (host_stats.graph_capture_calls > 0 and host_stats.graph_launches = 0)
                or trace_files.source_path like '%/{{ var("capture_trace_folder") }}/%'
                then 'a GPU-graph capture trace, not the workload: '
                    || case
                        when host_stats.graph_capture_calls > 0
                            then host_stats.graph_capture_calls || ' stream-capture / graph-instantiate calls and no graph replay'
                        else 'no capture call, but the file lies in a ' || '{{ var("capture_trace_folder") }}' || '/ folder'
                    end
                    || '; its ' || gpu_stats.gpu_events || ' GPU events (' || round(gpu_stats.gpu_time_us / 1000.0, 3)
                    || ' ms) are warm-up and capture-time work, the captured kernels run only when the graph is replayed '
                    || '(analyze the replay trace, with this trace''s folder as --capture-folder)'
            when host_stats.graph_capture_calls > 0
                then host_stats.graph_capture_calls || ' stream-capture / graph-instantiate calls beside '
                    || host_stats.graph_launches || ' graph replays: the GPU work issued while capturing is warm-up'
            else 'no GPU-graph capture'
        end
    from host_stats
    inner join gpu_stats on host_stats.trace_id = gpu_stats.trace_id
    inner join trace_files on host_stats.trace_id = trace_files.trace_id
    inner join trace_files as replay_files on host_stats.trace_id = replay_files.trace_id

    union all

    select
        trace_id,
        'profiler_steps',
        steps::double,
        {{ var('min_profiler_steps') }},
        case when steps < {{ var('min_profiler_steps') }} then 'info' else 'pass' end,
        case
            when steps = 0 then 'no ProfilerStep#N annotation: iterations are not marked, so one step cannot be told from '
                || 'warm-up or from the next, and no step-to-step noise can be measured'
            when steps < {{ var('min_profiler_steps') }} then steps
                || ' ProfilerStep: a single iteration; warm-up effects and step-to-step noise cannot be measured'
            else steps || ' ProfilerSteps: step-to-step noise can be measured (tracelake compare)'
        end
    from step_counts

    union all

    select
        gpu_stats.trace_id,
        'platform_detected',
        case when trace_platforms.is_detected then 1.0 else 0.0 end,
        1.0,
        case when gpu_stats.gpu_events > 0 and not trace_platforms.is_detected then 'warn' else 'pass' end,
        case
            when gpu_stats.gpu_events = 0 then 'no GPU events: no roofline is drawn'
            when trace_platforms.is_detected
                then 'device ' || coalesce('''' || trace_files.device_name || '''', '?') || ' is ' || trace_platforms.platform
            when trace_files.device_name is null
                then 'the trace names no device; the roofline falls back to ' || trace_platforms.platform
                    || {{ assumed_platform_reason('trace_platforms.assumed_for_runtime') }}
            else 'device ''' || trace_files.device_name || ''' matches no platform in seeds/platforms.csv; the roofline falls back to '
                || trace_platforms.platform || {{ assumed_platform_reason('trace_platforms.assumed_for_runtime') }}
        end
    from gpu_stats
    inner join trace_files on gpu_stats.trace_id = trace_files.trace_id
    inner join trace_platforms on gpu_stats.trace_id = trace_platforms.trace_id
),

all_checks as (
    select trace_id, check_name, value, threshold, verdict, detail from ingest_checks
    union all
    select trace_id, check_name, value, threshold, verdict, detail from derived_checks
),

final as (
    select
        trace_id || ':' || check_name as check_key,
        trace_id,
        check_name,
        value,
        threshold,
        verdict,
        detail
    from all_checks
)

select * from final
