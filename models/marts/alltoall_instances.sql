{#- One row per all-to-all(v) instance of a job (TraceLens' nccl_all2allv): the bytes all ranks
    send (the sum of their inputs), the wall time (latest end − earliest start) and the throughput
    over it, the ranks' duration spread, the size imbalance (largest rank input / mean rank input)
    and the hot pair (the (sender, receiver) of the most bytes in `alltoall_pairs`, when the
    splits are there and whole). A view. -#}
{{ config(materialized='view') }}

with calls as (
    select * from {{ ref('collective_calls') }}
    where collective_name in ('alltoall', 'alltoallv')
),

pairs as (
    select * from {{ ref('alltoall_pairs') }}
),

ranked_pairs as (
    select
        pairs.*,
        avg(bytes) over (partition by job_id, instance_id) as mean_pair_bytes,
        row_number() over (partition by job_id, instance_id order by bytes desc, src_rank, dst_rank) as bytes_rank
    from pairs
),

hot_pairs as (
    -- the pair of the most bytes (ties: the lowest sender, then receiver)
    select
        job_id,
        instance_id,
        src_rank as hot_src_rank,
        dst_rank as hot_dst_rank,
        bytes as hot_pair_bytes,
        mean_pair_bytes
    from ranked_pairs
    where bytes_rank = 1
),

instances as (
    select
        job_id,
        instance_id,
        arg_min(collective_name, rank) as collective_name,
        arg_min(coalesce(pg_name, 'all'), rank) as pg_name,
        arg_min(dtype, rank) as dtype,
        max(group_size) as group_size,
        count(distinct rank) as ranks_present,
        sum(in_nelems * dtype_bytes) as total_in_bytes,
        sum(in_nelems) as total_in_nelems,
        max(end_us) - min(start_us) as wall_us,
        max(dur_us) as max_rank_dur_us,
        min(dur_us) as min_rank_dur_us,
        avg(dur_us) as avg_rank_dur_us,
        max(in_nelems * dtype_bytes) / nullif(avg(in_nelems * dtype_bytes), 0) as size_imbalance,
        max(start_us) - min(start_us) as start_skew_us,
        max(end_us) - min(end_us) as end_skew_us,
        bool_or(splits_truncated) as splits_truncated
    from calls
    group by job_id, instance_id
),

final as (
    select
        instances.job_id,
        instances.instance_id,
        instances.collective_name,
        instances.pg_name,
        instances.dtype,
        instances.group_size,
        instances.ranks_present,
        instances.total_in_bytes,
        instances.total_in_nelems,
        instances.wall_us,
        instances.total_in_bytes / nullif(instances.wall_us, 0) / 1000.0 as throughput_gb_per_s,
        instances.total_in_bytes / 1048576.0 / 1024.0 / nullif(instances.wall_us / 1e6, 0) as throughput_gib_per_s,
        instances.max_rank_dur_us,
        instances.min_rank_dur_us,
        instances.avg_rank_dur_us,
        instances.size_imbalance,
        instances.start_skew_us,
        instances.end_skew_us,
        instances.splits_truncated,
        hot_pairs.hot_src_rank,
        hot_pairs.hot_dst_rank,
        hot_pairs.hot_pair_bytes,
        hot_pairs.hot_pair_bytes / nullif(hot_pairs.mean_pair_bytes, 0) as hot_pair_ratio
    from instances
    left join hot_pairs
        on instances.job_id = hot_pairs.job_id
        and instances.instance_id = hot_pairs.instance_id
)

select * from final
