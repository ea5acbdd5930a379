

with gaps as (
    select * from "warehouse"."intermediate"."int_gpu_idle_gaps_host_context"
),

final as (
    select
        trace_id,
        count(*) as gap_count,
        median(gap_us) as median_gap_us,
        quantile_cont(gap_us, 0.9) as p90_gap_us,
        max(gap_us) as max_gap_us,
        sum(gap_us) / 1000 as idle_time_ms
    from gaps
    group by trace_id
)

select * from final
