{#- One row per host runtime call the what-if replay moves (analyzers/replay.py): each call that
    launched a GPU event (replay_gpu_nodes.launch_call_idx) and each synchronizing call (var
    synchronizing_runtime_calls, and a copy's launch call, which blocks until its copy is done when the
    host buffer is pageable), in order on its thread. Between two of them lies host work the
    replay keeps (host_gap_us, measured). A call ends at the later of its own time (own_us) and, for a
    synchronizing call that waited, the end of the GPU work its process launched before it plus the
    measured return lag (wait_lag_us): so an unchanged replay reproduces the measured timeline. -#}
{{ config(materialized='incremental') }}

with runtime_calls as (
    select trace_id, event_idx, name, ts_us, dur_us, end_us, pid, tid from {{ ref('stg_trace__host_ops') }}
    where {{ is_new_trace() }} and category in ('cuda_runtime', 'cuda_driver')
),

gpu_nodes as (
    select * from {{ ref('replay_gpu_nodes') }}
    where {{ is_new_trace() }}
),

launching_calls as (
    select distinct trace_id, launch_call_idx as event_idx from gpu_nodes
    where launch_call_idx is not null
),

-- a copy's launch call may block until the copy is done (a pageable host buffer): whether it did is
-- read below from when it returned, as for the synchronizing calls
copy_launching_calls as (
    select
        trace_id,
        launch_call_idx as event_idx,
        min(ts_us) + {{ var('blocking_copy_share') }} * (max(end_us) - min(ts_us)) as blocked_until_us
    from gpu_nodes
    where launch_call_idx is not null and name ilike 'memcpy%'
    group by trace_id, launch_call_idx
),

synchronizing_calls as (
    select trace_id, event_idx from runtime_calls
    where name in ({%- for name in var('synchronizing_runtime_calls') %}'{{ name }}'{{ ', ' if not loop.last }}{% endfor -%})
    union
    select trace_id, event_idx from copy_launching_calls
),

replayed_calls as (
    select
        runtime_calls.*,
        synchronizing_calls.event_idx is not null as is_synchronizing,
        copy_launching_calls.blocked_until_us
    from runtime_calls
    left join synchronizing_calls
        on runtime_calls.trace_id = synchronizing_calls.trace_id
        and runtime_calls.event_idx = synchronizing_calls.event_idx
    left join copy_launching_calls
        on runtime_calls.trace_id = copy_launching_calls.trace_id
        and runtime_calls.event_idx = copy_launching_calls.event_idx
    where synchronizing_calls.event_idx is not null
        or exists (
            select 1 from launching_calls
            where launching_calls.trace_id = runtime_calls.trace_id
                and launching_calls.event_idx = runtime_calls.event_idx
        )
),

-- the latest end of the GPU work each process had launched, at each launch
gpu_work_running_end as (
    select
        trace_id,
        host_pid,
        launch_ts_us,
        max(end_us) over (
            partition by trace_id, host_pid order by launch_ts_us
            range between unbounded preceding and current row
        ) as running_end_us
    from gpu_nodes
    where launch_ts_us is not null
),

-- for each synchronizing call, the latest end of the GPU work its process launched up to it (a
-- blocking copy call waits for its own copy too)
gpu_work_waited_for as (
    select
        replayed_calls.trace_id,
        replayed_calls.event_idx,
        gpu_work_running_end.running_end_us as wait_end_us
    from replayed_calls
    asof inner join gpu_work_running_end
        on replayed_calls.trace_id = gpu_work_running_end.trace_id
        and replayed_calls.pid = gpu_work_running_end.host_pid
        and replayed_calls.ts_us >= gpu_work_running_end.launch_ts_us
    where replayed_calls.is_synchronizing
),

ordered as (
    select
        replayed_calls.*,
        gpu_work_waited_for.wait_end_us,
        row_number() over thread_order as thread_ordinal,
        replayed_calls.ts_us - lag(replayed_calls.end_us) over thread_order as host_gap_us
    from replayed_calls
    left join gpu_work_waited_for
        on replayed_calls.trace_id = gpu_work_waited_for.trace_id
        and replayed_calls.event_idx = gpu_work_waited_for.event_idx
    window thread_order as (
        partition by replayed_calls.trace_id, replayed_calls.pid, replayed_calls.tid
        order by replayed_calls.ts_us, replayed_calls.event_idx
    )
),

waits as (
    select
        ordered.*,
        -- a call that returned after the GPU work it waited for ended waited; a copy's launch call
        -- that returned only once most of its copy was done was blocked by it (a pageable buffer is
        -- staged in chunks: the call returns while the last chunk still moves)
        coalesce(is_synchronizing and (end_us >= wait_end_us or end_us >= blocked_until_us), false) as waited
    from ordered
),

final as (
    select
        trace_id,
        event_idx,
        name,
        pid,
        tid,
        thread_ordinal,
        ts_us,
        dur_us,
        end_us,
        host_gap_us,
        is_synchronizing,
        wait_end_us,
        waited as waited_for_gpu,
        -- negative for a copy call that returned before its copy's last chunk was done
        case when waited then end_us - wait_end_us end as wait_lag_us,
        case when waited then greatest(0.0, least(dur_us, end_us - wait_end_us)) else dur_us end as own_us
    from waits
)

select * from final
