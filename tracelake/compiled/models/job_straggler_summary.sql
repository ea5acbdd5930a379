

with calls as (
    select * from "warehouse"."main"."collective_calls"
),

instances as (
    select * from "warehouse"."main"."collective_instances"
),

job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

counted_instances as (
    select job_id, instance_id
    from instances
    where not is_desync
        and (collective_kind = 'implicit_sync' or (match_method = 'stream_ordinal' and collective_name = 'unknown'))
),

instance_counts as (
    select job_id, count(*) as num_collectives from counted_instances group by job_id
),

rank_waits as (
    select
        calls.job_id,
        calls.rank,
        sum(calls.wait_us) as total_wait_us,
        avg(calls.wait_us) as mean_wait_us,
        count(*) filter (where calls.is_last_arrival) as times_arrived_last,
        count(*) filter (where calls.is_first_arrival) as times_arrived_first
    from calls
    inner join counted_instances
        on calls.job_id = counted_instances.job_id
        and calls.instance_id = counted_instances.instance_id
    group by calls.job_id, calls.rank
),

rank_comm as (
    select job_id, rank, sum(dur_us) as total_comm_us from calls group by job_id, rank
),

final as (
    select
        job_ranks.job_id,
        job_ranks.rank,
        job_ranks.node_id,
        rank_waits.total_wait_us,
        rank_waits.mean_wait_us,
        coalesce(rank_waits.times_arrived_last, 0) as times_arrived_last,
        coalesce(rank_waits.times_arrived_first, 0) as times_arrived_first,
        100.0 * coalesce(rank_waits.times_arrived_last, 0) / nullif(instance_counts.num_collectives, 0)
            as pct_arrived_last,
        coalesce(instance_counts.num_collectives, 0) as num_collectives,
        coalesce(rank_comm.total_comm_us, 0) as total_comm_us
    from job_ranks
    left join rank_waits on job_ranks.job_id = rank_waits.job_id and job_ranks.rank = rank_waits.rank
    left join rank_comm on job_ranks.job_id = rank_comm.job_id and job_ranks.rank = rank_comm.rank
    left join instance_counts on job_ranks.job_id = instance_counts.job_id
)

select * from final
