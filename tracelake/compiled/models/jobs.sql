

with job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

clock_offsets as (
    select * from "warehouse"."main"."job_clock_offsets"
),

rank_report_spans as (
    -- each rank's E2E as its own report gives it (gpu_timeline: GPU events linked to a launch, so
    -- kernels queued before the profiled window and never launched in it stay out)
    select job_ranks.job_id, max(gpu_timeline.total_time_ms) * 1000.0 as step_time_us
    from job_ranks
    inner join "warehouse"."main"."gpu_timeline" as gpu_timeline on job_ranks.trace_id = gpu_timeline.trace_id
    group by job_ranks.job_id
),

rank_summary as (
    select
        job_id,
        max(world_size) as world_size,
        count(distinct rank) as rank_count,
        list(distinct rank order by rank) as ranks,
        count(distinct node_id) as node_count,
        -- the GPUs the ranks name, never the roofline assumed for a rank naming none the seed knows
        list(distinct coalesce(case when platform_source = 'trace device' then platform end, device_name)
            order by coalesce(case when platform_source = 'trace device' then platform end, device_name))
            filter (where platform_source = 'trace device' or device_name is not null) as platforms,
        min(base_time_us) as epoch_us,
        bool_or(has_base_time) as has_base_time
    from job_ranks
    group by job_id
),

clock_summary as (
    select
        job_id,
        bool_or(offset_us is null) as has_unaligned_node,
        bool_or(applied) as has_applied_offset,
        max(residual_us) as max_residual_us
    from clock_offsets
    group by job_id
),

final as (
    select
        rank_summary.job_id,
        rank_summary.world_size,
        rank_summary.rank_count,
        list_filter(
            range(coalesce(rank_summary.world_size, 0)::bigint),
            lambda r: not list_contains(rank_summary.ranks, r)
        )::integer[] as missing_ranks,
        rank_summary.node_count,
        rank_summary.platforms,
        rank_summary.epoch_us,
        rank_report_spans.step_time_us,
        case
            when rank_summary.node_count > 1 and coalesce(clock_summary.has_unaligned_node, true) then 'unaligned'
            when clock_summary.has_applied_offset then 'aligned'
            when rank_summary.has_base_time then 'base_time'
            else 'absolute_ts'
        end as clock_method,
        case
            when rank_summary.node_count > 1 and coalesce(clock_summary.has_unaligned_node, true) then null
            else clock_summary.max_residual_us
        end as clock_uncertainty_us
    from rank_summary
    left join clock_summary on rank_summary.job_id = clock_summary.job_id
    left join rank_report_spans on rank_summary.job_id = rank_report_spans.job_id
)

select * from final
