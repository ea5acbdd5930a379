{#- One row per matched collective of a job, with TraceLens' NcclAnalyser definitions:
    comm latency = the fastest rank's duration, start skew = the largest wait (latest start −
    earliest start), earliest arrival = the rank that waits most, avg wait over the ranks present,
    end skew = latest end − earliest end; algorithm bandwidth = message bytes / latency (decimal
    GB/s, and TraceLens' MB/1024/s = GiB/s), bus bandwidth = algorithm bandwidth x the seed's bus
    factor for the group size. A rank of the group missing the instance, or ranks disagreeing on
    its name, dtype or size, make it a desync (`is_desync`, `desync_reason`): data, not an
    error. A view. -#}
{{ config(materialized='view') }}

with calls as (
    select * from {{ ref('collective_calls') }}
),

job_ranks as (
    select * from {{ ref('job_ranks') }}
),

jobs as (
    select job_id, world_size, list(rank order by rank) as ranks
    from job_ranks
    group by job_id, world_size
),

instances as (
    select
        job_id,
        instance_id,
        any_value(match_method) as match_method,
        min(index_in_group) as index_in_group,
        arg_min(coalesce(pg_name, 'all'), rank) as pg_name,
        arg_min(collective_name, rank) as collective_name,
        arg_min(collective_kind, rank) as collective_kind,
        bool_or(is_p2p) as is_p2p,
        arg_min(dtype, rank) as dtype,
        arg_min(msg_bytes, rank) as msg_bytes,
        max(group_size) as group_size_given,
        arg_min(pg_ranks, rank) as pg_ranks,
        arg_min(bus_factor_slope, rank) as bus_factor_slope,
        arg_min(bus_factor_constant, rank) as bus_factor_constant,
        count(distinct rank) as ranks_present,
        count(*) as call_count,
        list(distinct rank) as present_ranks,
        count(distinct collective_name) as name_count,
        count(distinct dtype) as dtype_count,
        count(distinct msg_bytes) as size_count,
        min(dur_us) as comm_latency_us,
        max(wait_us) as start_skew_us,
        case when count(wait_us) = count(*) then max(end_us) - min(end_us) end as end_skew_us,
        avg(wait_us) as avg_wait_us,
        max(rank) filter (where is_first_arrival) as earliest_arrival_rank,
        max(rank) filter (where is_last_arrival) as last_arrival_rank,
        min(start_us) as first_start_us,
        max(end_us) as last_end_us
    from calls
    group by job_id, instance_id
),

expected_members as (
    -- the job's ranks that belong to the instance's group: its process-group ranks when the trace
    -- lists them, else every rank of the job when the group is the whole world (or unknown)
    select
        instances.*,
        -- a trace without group metadata (2023): when every rank of the world ran the instance, its
        -- group is the world
        coalesce(instances.group_size_given, case
            when instances.pg_ranks is null and instances.ranks_present = jobs.world_size then jobs.world_size
        end) as group_size,
        case
            when instances.is_p2p then instances.present_ranks
            when instances.pg_ranks is not null then list_intersect(instances.pg_ranks, jobs.ranks)
            when instances.group_size_given is null or instances.group_size_given = jobs.world_size then jobs.ranks
        end as expected_ranks,
        -- members of the group whose trace is not in the job (their nodes are unknown)
        case
            when instances.is_p2p then false
            when instances.pg_ranks is not null
                then len(list_intersect(instances.pg_ranks, jobs.ranks)) < len(instances.pg_ranks)
            else instances.ranks_present < coalesce(instances.group_size_given, jobs.world_size, instances.ranks_present)
        end as has_unseen_members
    from instances
    inner join jobs on instances.job_id = jobs.job_id
),

member_nodes as (
    select
        expected_members.job_id,
        expected_members.instance_id,
        count(distinct job_ranks.node_id) as node_count
    from expected_members
    inner join job_ranks
        on expected_members.job_id = job_ranks.job_id
        and list_contains(coalesce(expected_members.expected_ranks, expected_members.present_ranks), job_ranks.rank)
    group by expected_members.job_id, expected_members.instance_id
),

final as (
    select
        expected_members.job_id,
        expected_members.instance_id,
        expected_members.match_method,
        expected_members.index_in_group,
        expected_members.pg_name,
        expected_members.collective_name,
        expected_members.collective_kind,
        expected_members.dtype,
        expected_members.msg_bytes,
        expected_members.group_size,
        len(expected_members.expected_ranks) as ranks_expected,
        expected_members.ranks_present,
        expected_members.comm_latency_us,
        expected_members.start_skew_us,
        expected_members.end_skew_us,
        expected_members.avg_wait_us,
        expected_members.earliest_arrival_rank,
        expected_members.last_arrival_rank,
        expected_members.msg_bytes / nullif(expected_members.comm_latency_us, 0) / 1000.0 as algo_gb_per_s,
        expected_members.msg_bytes / nullif(expected_members.comm_latency_us, 0) / 1000.0
            * (expected_members.bus_factor_slope * (expected_members.group_size - 1) / expected_members.group_size
               + expected_members.bus_factor_constant) as bus_gb_per_s,
        expected_members.msg_bytes / 1048576.0 / 1024.0 / nullif(expected_members.comm_latency_us / 1e6, 0)
            as algo_gib_per_s,
        expected_members.msg_bytes / 1048576.0 / 1024.0 / nullif(expected_members.comm_latency_us / 1e6, 0)
            * (expected_members.bus_factor_slope * (expected_members.group_size - 1) / expected_members.group_size
               + expected_members.bus_factor_constant) as bus_gib_per_s,
        case
            when member_nodes.node_count > 1 then 'inter_node'
            when member_nodes.node_count = 1 and not expected_members.has_unseen_members then 'intra_node'
            else 'unknown'
        end as node_span,
        expected_members.first_start_us,
        expected_members.last_end_us,
        desync.reason is not null as is_desync,
        desync.reason as desync_reason
    from expected_members
    left join member_nodes
        on expected_members.job_id = member_nodes.job_id
        and expected_members.instance_id = member_nodes.instance_id
    cross join lateral (
        select nullif(concat_ws('; ',
            case when expected_members.ranks_present < len(expected_members.expected_ranks)
                then 'missing ranks ' || array_to_string(
                    list_sort(list_filter(expected_members.expected_ranks,
                        lambda r: not list_contains(expected_members.present_ranks, r))), ',') end,
            case when expected_members.call_count > expected_members.ranks_present
                then 'a rank has several kernels' end,
            case when expected_members.name_count > 1 and not expected_members.is_p2p
                then 'ranks disagree on the collective' end,
            case when expected_members.dtype_count > 1 then 'ranks disagree on the dtype' end,
            case when expected_members.size_count > 1 and not expected_members.is_p2p
                    and expected_members.collective_name <> 'alltoallv'
                then 'ranks disagree on the message size' end
        ), '') as reason
    ) as desync
)

select * from final
