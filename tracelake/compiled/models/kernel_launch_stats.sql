

with launched as (
    select * from "warehouse"."intermediate"."int_kernel_host_launches"
),

gpu_ops as (
    select trace_id, event_idx, category, name, device, stream, correlation from "warehouse"."main"."kernels"
),

final as (
    select
        launched.trace_id,
        launched.event_idx,
        gpu_ops.correlation,
        gpu_ops.category,
        gpu_ops.name,
        gpu_ops.device,
        gpu_ops.stream,
        launched.launch_event_idx,
        launched.launch_name,
        launched.is_graph_launch,
        launched.launch_ts_us,
        launched.launch_end_us - launched.launch_ts_us as cpu_duration_us,
        launched.dur_us as gpu_duration_us,
        greatest(launched.ts_us - launched.launch_end_us, 0) as launch_delay_us,
        launched.ts_us - launched.launch_ts_us as start_after_call_us
    from launched
    inner join gpu_ops
        on launched.trace_id = gpu_ops.trace_id
        and launched.event_idx = gpu_ops.event_idx
)

select * from final
