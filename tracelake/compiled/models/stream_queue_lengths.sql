

with launched as (
    select
        launches.trace_id,
        launches.event_idx,
        launches.ts_us,
        launches.launch_ts_us,
        gpu_ops.device,
        gpu_ops.stream
    from "warehouse"."intermediate"."int_kernel_host_launches" as launches
    inner join "warehouse"."main"."kernels" as gpu_ops
        on launches.trace_id = gpu_ops.trace_id
        and launches.event_idx = gpu_ops.event_idx
),

queue_changes as (
    select trace_id, device, stream, event_idx, launch_ts_us as ts_us, 1 as queue_change, 'launch' as change_kind
    from launched
    union all
    select trace_id, device, stream, event_idx, ts_us, -1 as queue_change, 'start' as change_kind
    from launched
),

final as (
    select
        trace_id,
        device,
        stream,
        ts_us,
        event_idx,
        change_kind,
        sum(queue_change) over stream_order as queue_length,
        lead(ts_us) over stream_order - ts_us as held_us
    from queue_changes
    window stream_order as (
        partition by trace_id, device, stream
        order by ts_us, queue_change desc, event_idx
        rows between unbounded preceding and current row
    )
)

select * from final
