{#- Frequent kernel sequences: every run of var kernel_sequence_length consecutive kernels on one
    device and stream (in start order; memcpy and memset ops are not kernels and are left out), as
    an n-gram counted over the trace's streams. Occurrences overlap: the stream A B C A B C holds
    A-B-C twice, B-C-A and C-A-B once each. A view: read one trace at a time. -#}
{{ config(materialized='view') }}

with stream_kernels as (
    select trace_id, device, stream, event_idx, name, ts_us, dur_us from {{ ref('kernels') }}
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
        rows between current row and {{ var('kernel_sequence_length') - 1 }} following
    )
),

full_windows as (
    select * from windows
    where kernel_count = {{ var('kernel_sequence_length') }}
),

final as (
    select
        trace_id,
        array_to_string(kernel_names, ' -> ') as sequence,
        kernel_names,
        {{ var('kernel_sequence_length') }} as sequence_length,
        count(*) as occurrences,
        sum(gpu_time_us) as total_gpu_time_us,
        sum(gpu_time_us) / count(*) as avg_gpu_time_us,
        count(distinct (device, stream)) as stream_count,
        min(first_event_idx) as first_event_idx
    from full_windows
    group by trace_id, kernel_names
)

select * from final
