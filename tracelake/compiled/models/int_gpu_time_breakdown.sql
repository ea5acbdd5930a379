with merged_intervals as (
    select * from "warehouse"."intermediate"."int_gpu_intervals_merged"
),

set_lengths as (
    select
        trace_id,
        event_scope,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'computation') as computation_us,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'communication') as communication_us,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'memcpy') as memcpy_us,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'compute_or_comm') as compute_or_comm_us,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'all') as busy_us,
        max(merged_end_us) filter (where interval_set = 'all')
            - min(merged_start_us) filter (where interval_set = 'all') as total_us
    from merged_intervals
    group by trace_id, event_scope
),

final as (
    select
        trace_id,
        event_scope,
        total_us,
        coalesce(computation_us, 0) as computation_us,
        coalesce(compute_or_comm_us, 0) - coalesce(computation_us, 0) as exposed_comm_us,
        busy_us - coalesce(compute_or_comm_us, 0) as exposed_memcpy_us,
        busy_us,
        total_us - busy_us as idle_us,
        coalesce(communication_us, 0) as total_comm_us,
        coalesce(memcpy_us, 0) as total_memcpy_us
    from set_lengths
)

select * from final
