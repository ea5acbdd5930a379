

with gaps as (
    select * from "warehouse"."intermediate"."int_gpu_idle_gaps_host_context"
),

sync_gaps as (
    select
        trace_id,
        gap_class = 'sync_blocked' as spans_gap,
        start_runtime_name as name,
        gap_us,
        runtime_return_after_gap_start_us
    from gaps
    where gap_class = 'sync_blocked' or gap_class_reason = 'launched_after_sync_returned'
),

final as (
    select
        trace_id,
        spans_gap,
        name,
        count(*) as gap_count,
        sum(gap_us) / 1000 as gap_time_ms,
        median(runtime_return_after_gap_start_us) as median_return_after_gap_start_us
    from sync_gaps
    group by trace_id, spans_gap, name
)

select * from final
