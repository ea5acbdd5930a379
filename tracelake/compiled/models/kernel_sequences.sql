

with stream_kernels as (
    select trace_id, device, stream, event_idx, name, ts_us, dur_us from "warehouse"."main"."kernels"
    where category = 'kernel'
),

windows as (
    select
        trace_id,
        device,
        stream,
        event_idx as first_event_idx,
        list(name) over following_kernels as kernel_names,
        sum(dur_us) over following_kernels as gpu_time_us,
        count(*) over following_kernels as kernel_count
    from stream_kernels
    window following_kernels as (
        partition by trace_id, device, stream
        order by ts_us, event_idx
        rows between current row and 2 following
    )
),

full_windows as (
    select * from windows
    where kernel_count = 3
),

final as (
    select
        trace_id,
        array_to_string(kernel_names, ' -> ') as sequence,
        kernel_names,
        3 as sequence_length,
        count(*) as occurrences,
        sum(gpu_time_us) as total_gpu_time_us,
        sum(gpu_time_us) / count(*) as avg_gpu_time_us,
        count(distinct (device, stream)) as stream_count,
        min(first_event_idx) as first_event_idx
    from full_windows
    group by trace_id, kernel_names
)

select * from final
