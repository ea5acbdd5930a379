

with job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

implicit_sync_calls as (
    select job_id, instance_id, rank, node_id, end_raw_us
    from "warehouse"."intermediate"."int_job_collective_calls"
    where collective_kind = 'implicit_sync'
),

job_nodes as (
    select job_id, node_id, min(rank) as lowest_rank
    from job_ranks
    group by job_id, node_id
),

reference_nodes as (
    select job_id, arg_min(node_id, lowest_rank) as reference_node_id
    from job_nodes
    group by job_id
),

instance_node_ends as (
    select job_id, instance_id, node_id, median(end_raw_us) as node_end_us
    from implicit_sync_calls
    group by job_id, instance_id, node_id
),

shared_instances as (
    -- each instance a node shares with the reference node, and how much later the node ends
    select
        node_ends.job_id,
        node_ends.node_id,
        node_ends.instance_id,
        node_ends.node_end_us - reference_ends.node_end_us as end_difference_us
    from instance_node_ends as node_ends
    inner join reference_nodes on node_ends.job_id = reference_nodes.job_id
    inner join instance_node_ends as reference_ends
        on node_ends.job_id = reference_ends.job_id
        and node_ends.instance_id = reference_ends.instance_id
        and reference_ends.node_id = reference_nodes.reference_node_id
),

node_estimates as (
    select
        job_nodes.job_id,
        job_nodes.node_id,
        job_nodes.node_id = reference_nodes.reference_node_id as is_reference,
        case when job_nodes.node_id = reference_nodes.reference_node_id then 0.0
             else median(shared_instances.end_difference_us) end as offset_us,
        count(shared_instances.instance_id) as collectives_used
    from job_nodes
    inner join reference_nodes on job_nodes.job_id = reference_nodes.job_id
    left join shared_instances
        on job_nodes.job_id = shared_instances.job_id
        and job_nodes.node_id = shared_instances.node_id
    group by job_nodes.job_id, job_nodes.node_id, reference_nodes.reference_node_id
),

applied_offsets as (
    select
        *,
        not is_reference and abs(offset_us) > 20.0 as applied
    from node_estimates
),

aligned_ends as (
    select
        implicit_sync_calls.job_id,
        implicit_sync_calls.instance_id,
        implicit_sync_calls.node_id,
        implicit_sync_calls.end_raw_us - case when applied_offsets.applied then applied_offsets.offset_us else 0 end
            as end_us
    from implicit_sync_calls
    inner join applied_offsets
        on implicit_sync_calls.job_id = applied_offsets.job_id
        and implicit_sync_calls.node_id = applied_offsets.node_id
),

instance_medians as (
    select job_id, instance_id, median(end_us) as median_end_us
    from aligned_ends
    group by job_id, instance_id
),

residuals as (
    select
        aligned_ends.job_id,
        aligned_ends.node_id,
        median(abs(aligned_ends.end_us - instance_medians.median_end_us)) as residual_us
    from aligned_ends
    inner join instance_medians
        on aligned_ends.job_id = instance_medians.job_id
        and aligned_ends.instance_id = instance_medians.instance_id
    group by aligned_ends.job_id, aligned_ends.node_id
),

final as (
    select
        applied_offsets.job_id,
        applied_offsets.node_id,
        applied_offsets.is_reference,
        applied_offsets.offset_us,
        residuals.residual_us,
        applied_offsets.collectives_used,
        coalesce(applied_offsets.applied, false) as applied
    from applied_offsets
    left join residuals
        on applied_offsets.job_id = residuals.job_id
        and applied_offsets.node_id = residuals.node_id
)

select * from final
