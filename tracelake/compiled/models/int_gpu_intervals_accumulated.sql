with merged_intervals as (
    select * from "warehouse"."intermediate"."int_gpu_intervals_merged"
),

accumulated as (
    select
        trace_id,
        event_scope,
        interval_set,
        merged_start_us,
        merged_end_us,
        coalesce(sum(merged_end_us - merged_start_us) over (
            partition by trace_id, event_scope, interval_set
            order by merged_start_us
            rows between unbounded preceding and 1 preceding
        ), 0) as covered_before_us
    from merged_intervals
)

select * from accumulated
