{#- One row per GPU event (kernel, memcpy, memset): a node of the trace's dependency graph for the
    what-if replay (analyzers/replay.py) and the critical path. An event starts at the later of two
    edges: its stream predecessor's end plus stream_lag_us (its chain is its device and stream, in
    start order) and its launch call's start plus launch_lag_us (the graph launch of a replayed GPU
    graph). The edge that bound on the measured timeline keeps its measured lag; the other takes the
    trace's median lag of that kind when it bound, never more than its own measured lag, so an
    unchanged replay puts every event where it was measured. An event with neither edge is anchored
    at its measured start. -#}
{{ config(materialized='incremental') }}

with gpu_events as (
    select
        trace_id,
        event_idx,
        device,
        stream,
        name,
        ts_us,
        dur_us,
        end_us,
        coalesce(graph_launch_event_idx, launch_event_idx) as launch_event_idx
    from {{ ref('kernels') }}
    where {{ is_new_trace() }}
),

runtime_calls as (
    select trace_id, event_idx, ts_us, pid, tid from {{ ref('stg_trace__host_ops') }}
    where {{ is_new_trace() }} and category in ('cuda_runtime', 'cuda_driver')
),

steps as (
    select trace_id, step_number, host_start_us, host_start_us + 1000.0 * host_time_ms as host_end_us from {{ ref('profiler_steps') }}
    where {{ is_new_trace() }}
),

chained as (
    select
        gpu_events.*,
        runtime_calls.event_idx as launch_call_idx,
        runtime_calls.ts_us as launch_ts_us,
        runtime_calls.pid as host_pid,
        runtime_calls.tid as host_tid,
        row_number() over stream_order as chain_ordinal,
        lag(gpu_events.end_us) over stream_order as previous_end_us
    from gpu_events
    left join runtime_calls
        on gpu_events.trace_id = runtime_calls.trace_id
        and gpu_events.launch_event_idx = runtime_calls.event_idx
    window stream_order as (
        partition by gpu_events.trace_id, gpu_events.device, gpu_events.stream
        order by gpu_events.ts_us, gpu_events.event_idx
    )
),

bound as (
    select
        *,
        case
            when launch_ts_us is null and previous_end_us is null then 'anchored'
            when launch_ts_us is null then 'stream'
            when previous_end_us is null then 'launch'
            -- the launch reaches the GPU a launch lag after its call, the predecessor frees the
            -- stream a stream lag after its end: the later of the two bound
            when launch_ts_us + {{ var('replay_launch_lag_us') }}
                > previous_end_us + {{ var('replay_stream_lag_us') }} then 'launch'
            else 'stream'
        end as binding_edge
    from chained
),

typical_lags as (
    select
        trace_id,
        -- a chain's first event binds to its launch whatever its lag (a graph launch queued behind
        -- other work: milliseconds), so only launches that beat a stream predecessor are samples
        coalesce(median(ts_us - launch_ts_us) filter (where binding_edge = 'launch' and previous_end_us is not null),
                 {{ var('replay_launch_lag_us') }}) as launch_lag_us,
        coalesce(median(ts_us - previous_end_us) filter (where binding_edge = 'stream'),
                 {{ var('replay_stream_lag_us') }}) as stream_lag_us
    from bound
    group by trace_id
),

lagged as (
    select
        bound.*,
        case
            when bound.launch_ts_us is null then null
            when bound.binding_edge = 'launch' then bound.ts_us - bound.launch_ts_us
            else least(typical_lags.launch_lag_us, bound.ts_us - bound.launch_ts_us)
        end as launch_lag_us,
        case
            when bound.previous_end_us is null then null
            when bound.binding_edge = 'stream' then bound.ts_us - bound.previous_end_us
            else least(typical_lags.stream_lag_us, bound.ts_us - bound.previous_end_us)
        end as stream_lag_us
    from bound
    inner join typical_lags on bound.trace_id = typical_lags.trace_id
),

-- the latest end of any GPU event of the device at or before each event's start
device_ends as (
    select trace_id, device, stream, event_idx, end_us from chained
),

-- an event that started longer after both its launch and its predecessor than a launch takes
-- waited for something else: the GPU event of another stream that ended last before it (an event
-- wait between streams)
cross_stream_waits as (
    select
        lagged.trace_id,
        lagged.event_idx,
        device_ends.event_idx as wait_event_idx,
        lagged.ts_us - device_ends.end_us as wait_lag_us
    from lagged
    inner join typical_lags on lagged.trace_id = typical_lags.trace_id
    asof inner join device_ends
        on lagged.trace_id = device_ends.trace_id
        and lagged.device = device_ends.device
        and lagged.ts_us >= device_ends.end_us
    where lagged.binding_edge <> 'anchored'
        and lagged.ts_us - greatest(
            coalesce(lagged.launch_ts_us + typical_lags.launch_lag_us, lagged.previous_end_us + typical_lags.stream_lag_us),
            coalesce(lagged.previous_end_us + typical_lags.stream_lag_us, lagged.launch_ts_us + typical_lags.launch_lag_us)
        ) > {{ var('idle_gap_launch_latency_us') }}
        and device_ends.stream is distinct from lagged.stream
),

final as (
    select
        lagged.trace_id,
        lagged.event_idx,
        lagged.device,
        lagged.stream,
        lagged.chain_ordinal,
        lagged.name,
        lagged.ts_us,
        lagged.dur_us,
        lagged.end_us,
        lagged.launch_call_idx,
        lagged.host_pid,
        lagged.host_tid,
        lagged.launch_ts_us,
        lagged.previous_end_us,
        lagged.binding_edge,
        -- an event that waited on another stream keeps only typical lags on its own edges: the wait bound
        case
            when cross_stream_waits.wait_event_idx is not null
                then least(typical_lags.launch_lag_us, lagged.launch_lag_us)
            else lagged.launch_lag_us
        end as launch_lag_us,
        case
            when cross_stream_waits.wait_event_idx is not null
                then least(typical_lags.stream_lag_us, lagged.stream_lag_us)
            else lagged.stream_lag_us
        end as stream_lag_us,
        cross_stream_waits.wait_event_idx,
        cross_stream_waits.wait_lag_us,
        steps.step_number
    from lagged
    inner join typical_lags on lagged.trace_id = typical_lags.trace_id
    left join cross_stream_waits
        on lagged.trace_id = cross_stream_waits.trace_id
        and lagged.event_idx = cross_stream_waits.event_idx
    left join steps
        on lagged.trace_id = steps.trace_id
        and lagged.launch_ts_us >= steps.host_start_us
        and lagged.launch_ts_us < steps.host_end_us
)

select * from final
