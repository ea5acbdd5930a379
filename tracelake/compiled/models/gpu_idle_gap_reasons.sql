

with gaps as (
    select * from "warehouse"."intermediate"."int_gpu_idle_gaps_host_context"
),

final as (
    select
        trace_id,
        gap_class,
        gap_class_reason as reason,
        count(*) as gap_count,
        sum(gap_us) / 1000 as idle_time_ms,
        median(launch_lead_us) as median_launch_lead_us
    from gaps
    group by trace_id, gap_class, gap_class_reason
)

select * from final
