{#- Idle time per trace, device and stream, split as HTA's get_idle_time_breakdown: each gap
    between consecutive GPU ops of a stream (kernels, memcpys, memsets in start order) is
    `host_wait` when the next op's launch call started after the previous op ended (the stream ran
    dry), else `kernel_wait` when shorter than var stream_kernel_wait_us (back-to-back launch
    overhead), else `other` (the op waited on something else: an event of another stream, a
    collective's peer). A stream of one op has no gap and no row. A view. -#}
{{ config(materialized='view') }}

with stream_ops as (
    select
        gpu_ops.trace_id,
        gpu_ops.event_idx,
        gpu_ops.device,
        gpu_ops.stream,
        gpu_ops.ts_us,
        gpu_ops.end_us,
        launches.launch_ts_us
    from {{ ref('kernels') }} as gpu_ops
    left join {{ ref('int_kernel_host_launches') }} as launches
        on gpu_ops.trace_id = launches.trace_id
        and gpu_ops.event_idx = launches.event_idx
),

ordered as (
    select
        *,
        lag(end_us) over (partition by trace_id, device, stream order by ts_us, event_idx) as previous_end_us
    from stream_ops
),

gaps as (
    select
        trace_id,
        device,
        stream,
        ts_us - previous_end_us as idle_us,
        case
            when launch_ts_us > previous_end_us then 'host_wait'
            when ts_us - previous_end_us < {{ var('stream_kernel_wait_us') }} then 'kernel_wait'
            else 'other'
        end as idle_category
    from ordered
    where previous_end_us is not null
),

final as (
    select
        trace_id,
        device,
        stream,
        idle_category,
        count(*) as gap_count,
        sum(idle_us) as idle_us,
        sum(idle_us) / nullif(sum(sum(idle_us)) over (partition by trace_id, device, stream), 0) as idle_share
    from gaps
    group by trace_id, device, stream, idle_category
)

select * from final
