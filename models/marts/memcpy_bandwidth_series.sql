{#- Memory-copy bandwidth over time per trace, device and copy kind (`Memcpy HtoD`, `Memcpy DtoH`,
    `Memcpy DtoD`, `Memcpy PtoP`, `Memcpy HtoH`, `Memset`), one row per change (a step function:
    the value holds until the next row of its kind): the sum of the bandwidths of the copies running
    then, as HTA's get_memory_bw_time_series. A copy's bandwidth is the profiler's own
    `memory bandwidth (GB/s)` (measured on the nanosecond clock, finer than the file's microsecond
    timestamps), else bytes / duration (gpu_transfers.achieved_gb_per_s); a copy with neither (no
    bytes, zero duration) adds nothing. At one timestamp ends come before starts. A view. -#}
{{ config(materialized='view') }}

with transfers as (
    select * from {{ ref('gpu_transfers') }}
),

recorded as (
    select
        trace_id,
        event_idx,
        try_cast(json_extract_string(args, '$."memory bandwidth (GB/s)"') as double) as recorded_gb_per_s
    from {{ ref('stg_trace__events') }}
    where category in ('gpu_memcpy', 'gpu_memset')
),

copies as (
    select
        transfers.trace_id,
        transfers.event_idx,
        transfers.device,
        case when transfers.transfer_kind = 'memset' then 'Memset'
             else 'Memcpy ' || coalesce(transfers.direction, 'unknown') end as copy_kind,
        transfers.ts_us,
        transfers.end_us,
        coalesce(recorded.recorded_gb_per_s, transfers.achieved_gb_per_s) as gb_per_s
    from transfers
    left join recorded
        on transfers.trace_id = recorded.trace_id
        and transfers.event_idx = recorded.event_idx
),

bandwidth_changes as (
    select trace_id, device, copy_kind, event_idx, ts_us, gb_per_s as bandwidth_change from copies
    where gb_per_s is not null
    union all
    select trace_id, device, copy_kind, event_idx, end_us as ts_us, -gb_per_s as bandwidth_change from copies
    where gb_per_s is not null
),

final as (
    select
        trace_id,
        device,
        copy_kind,
        ts_us,
        event_idx,
        bandwidth_change,
        -- a running sum of doubles can end a hair below zero when the last copy ends
        greatest(sum(bandwidth_change) over kind_order, 0) as gb_per_s,
        lead(ts_us) over kind_order - ts_us as held_us
    from bandwidth_changes
    window kind_order as (
        partition by trace_id, device, copy_kind
        order by ts_us, bandwidth_change, event_idx
        rows between unbounded preceding and current row
    )
)

select * from final
