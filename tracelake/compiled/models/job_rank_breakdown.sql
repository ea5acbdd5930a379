

with job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

rank_times as (
    select * from "warehouse"."intermediate"."int_rank_time_breakdown"
),

final as (
    select
        job_ranks.job_id,
        job_ranks.rank,
        job_ranks.trace_id,
        job_ranks.node_id,
        rank_times.span_us,
        rank_times.busy_us,
        rank_times.kernel_sum_us,
        rank_times.gpu_event_count,
        rank_times.comm_event_count,
        rank_times.computation_us,
        rank_times.communication_us,
        rank_times.memory_us,
        rank_times.exposed_comm_us,
        rank_times.non_compute_us,
        rank_times.idle_us,
        rank_times.comm_comp_overlap_us,
        rank_times.comm_comp_overlap_percent,
        100.0 * rank_times.idle_us / nullif(rank_times.span_us, 0) as idle_time_percent,
        100.0 * rank_times.computation_us / nullif(rank_times.span_us, 0) as compute_time_percent,
        100.0 * rank_times.non_compute_us / nullif(rank_times.span_us, 0) as non_compute_time_percent,
        100.0 * rank_times.exposed_comm_us / nullif(rank_times.span_us, 0) as exposed_comm_time_percent
    from job_ranks
    inner join rank_times on job_ranks.trace_id = rank_times.trace_id
)

select * from final
