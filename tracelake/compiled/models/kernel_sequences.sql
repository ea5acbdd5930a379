

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

trace_kernel_time as (
    select trace_id, sum(dur_us) as kernel_time_us from stream_kernels
    group by trace_id
),

final as (
    select
        full_windows.trace_id,
        array_to_string(full_windows.kernel_names, ' -> ') as sequence,
        full_windows.kernel_names,
        3 as sequence_length,
        count(*) as occurrences,
        sum(full_windows.gpu_time_us) as total_gpu_time_us,
        sum(full_windows.gpu_time_us) / count(*) as avg_gpu_time_us,
        100.0 * sum(full_windows.gpu_time_us) / nullif(any_value(trace_kernel_time.kernel_time_us), 0)
            as kernel_time_percent,
        count(distinct (full_windows.device, full_windows.stream)) as stream_count,
        min(full_windows.first_event_idx) as first_event_idx
    from full_windows
    inner join trace_kernel_time on full_windows.trace_id = trace_kernel_time.trace_id
    group by full_windows.trace_id, full_windows.kernel_names
)

select * from final
