

with runtime_calls as (
    select trace_id, event_idx, name, ts_us, dur_us, end_us, pid, tid from "warehouse"."staging"."stg_trace__host_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@') and category in ('cuda_runtime', 'cuda_driver')
),

gpu_nodes as (
    select * from "warehouse"."main"."replay_gpu_nodes"
    where trace_id in ('@@NEW_TRACE_IDS@@')
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
        min(ts_us) + 0.5 * (max(end_us) - min(ts_us)) as blocked_until_us
    from gpu_nodes
    where launch_call_idx is not null and name ilike 'memcpy%'
    group by trace_id, launch_call_idx
),

synchronizing_calls as (
    select trace_id, event_idx from runtime_calls
    where name in ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize', 'cuCtxSynchronize', 'cuStreamSynchronize', 'cuEventSynchronize', 'hipDeviceSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize', 'cudaMemcpy', 'cudaMemcpy2D', 'cuMemcpyDtoH_v2', 'cuMemcpyHtoD_v2', 'hipMemcpy', 'hipMemcpy2D', 'hipMemcpyWithStream', 'hipMemcpyDtoH', 'hipMemcpyHtoD')
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
