

with job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

comm_kernels as (
    select * from "warehouse"."intermediate"."int_collective_kernels"
),

job_epochs as (
    select job_id, min(base_time_us) as epoch_us from job_ranks group by job_id
),

calls as (
    select
        job_ranks.job_id,
        comm_kernels.*,
        job_ranks.rank,
        job_ranks.node_id,
        coalesce(comm_kernels.pg_name, 'all') as pg_key,
        (job_ranks.base_time_us - job_epochs.epoch_us)::double + comm_kernels.ts_us as start_raw_us,
        (job_ranks.base_time_us - job_epochs.epoch_us)::double + comm_kernels.end_us as end_raw_us
    from comm_kernels
    inner join job_ranks on comm_kernels.trace_id = job_ranks.trace_id
    inner join job_epochs on job_ranks.job_id = job_epochs.job_id
),

group_methods as (
    select
        job_id,
        pg_key,
        case
            when bool_and(comms_id is not null) then 'comms_id'
            when bool_and(pg_name is not null and seq is not null) then 'pg_seq'
            when bool_and(pg_name is not null) then 'pg_ordinal'
            else 'stream_ordinal'
        end as match_method
    from calls
    group by job_id, pg_key
),

ordinals as (
    select
        calls.*,
        group_methods.match_method,
        row_number() over (
            partition by calls.job_id, calls.rank, calls.pg_key, calls.is_p2p
            order by calls.start_raw_us, calls.event_idx
        ) - 1 as ordinal_in_group,
        row_number() over (
            partition by calls.job_id, calls.rank, calls.pg_key
            order by calls.start_raw_us, calls.event_idx
        ) - 1 as ordinal_in_stream
    from calls
    inner join group_methods
        on calls.job_id = group_methods.job_id
        and calls.pg_key = group_methods.pg_key
),

final as (
    select
        ordinals.*,
        case
            when match_method in ('comms_id', 'pg_seq') then coalesce(seq, ordinal_in_group)
            when match_method = 'pg_ordinal' then ordinal_in_group
            else ordinal_in_stream
        end as index_in_group,
        case match_method
            when 'comms_id' then 'comms_id:' || comms_id
            when 'pg_seq' then pg_key || (case when is_p2p then ':p2p' else ':coll' end) || ':seq' || seq
            when 'pg_ordinal' then pg_key || (case when is_p2p then ':p2p' else ':coll' end) || ':' || ordinal_in_group
            else 'all:' || ordinal_in_stream
        end as instance_id
    from ordinals
)

select * from final
