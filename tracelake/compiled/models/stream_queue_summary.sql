

with queue_lengths as (
    select * from "warehouse"."main"."stream_queue_lengths"
),

final as (
    select
        trace_id,
        device,
        stream,
        count(*) filter (where change_kind = 'launch') as launch_count,
        count(*) as change_count,
        avg(queue_length) as mean_queue_length,
        stddev_samp(queue_length) as std_queue_length,
        min(queue_length) as min_queue_length,
        quantile_cont(queue_length, 0.25) as p25_queue_length,
        quantile_cont(queue_length, 0.5) as median_queue_length,
        quantile_cont(queue_length, 0.75) as p75_queue_length,
        max(queue_length) as max_queue_length,
        sum(queue_length * held_us) / nullif(sum(held_us), 0) as time_weighted_queue_length,
        max(ts_us) - min(ts_us) as span_us,
        1024 as queue_limit,
        coalesce(sum(held_us) filter (where queue_length >= 1024), 0)
            as blocked_on_full_queue_us,
        coalesce(sum(held_us) filter (where queue_length >= 1024), 0)
            / nullif(max(ts_us) - min(ts_us), 0) as blocked_share
    from queue_lengths
    group by trace_id, device, stream
)

select * from final
