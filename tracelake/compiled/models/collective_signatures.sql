

with instances as (
    select * from "warehouse"."main"."collective_instances"
    where not is_desync
),

jobs as (
    select * from "warehouse"."main"."jobs"
),

job_ranks as (
    select * from "warehouse"."main"."job_ranks"
),

interconnect_peaks as (
    select * from "warehouse"."main"."interconnect_peaks"
),

job_link_peaks as (
    select job_platforms.job_id, interconnect_peaks.link_class, min(interconnect_peaks.peak_gb_per_s) as peak_gb_per_s
    from (select distinct job_id, platform from job_ranks) as job_platforms
    inner join interconnect_peaks on job_platforms.platform = interconnect_peaks.platform
    group by job_platforms.job_id, interconnect_peaks.link_class
),

signature_stats as (
    select
        job_id,
        collective_name,
        dtype,
        msg_bytes,
        pg_name,
        node_span,
        any_value(collective_kind) as collective_kind,
        max(group_size) as group_size,
        count(*) as instance_count,
        median(comm_latency_us) as median_latency_us,
        median(bus_gb_per_s) as median_bus_gb_per_s,
        median(start_skew_us) as median_start_skew_us,
        median(avg_wait_us / nullif(avg_wait_us + comm_latency_us, 0)) as median_wait_share,
        sum(avg_wait_us * ranks_present) as total_wait_us
    from instances
    group by job_id, collective_name, dtype, msg_bytes, pg_name, node_span
),

measured as (
    select
        signature_stats.*,
        job_link_peaks.peak_gb_per_s as peak_bus_gb_per_s,
        signature_stats.median_bus_gb_per_s / nullif(job_link_peaks.peak_gb_per_s, 0) as bandwidth_fraction,
        jobs.clock_method,
        signature_stats.median_wait_share > 0.5 as waiting_dominates
    from signature_stats
    left join jobs on signature_stats.job_id = jobs.job_id
    left join job_link_peaks
        on signature_stats.job_id = job_link_peaks.job_id
        and signature_stats.node_span = job_link_peaks.link_class
),

classified as (
    select
        *,
        case
            when clock_method = 'unaligned' then 'clock_unaligned'
            -- one or two instances decide only when every rank's waiting dwarfs the transfer
            when instance_count < 3
                and not coalesce(median_wait_share > 0.9, false)
                then 'few_instances'
            when waiting_dominates
                and bandwidth_fraction >= 0.5 then 'waiting_at_link_peak'
            when waiting_dominates then 'waiting_dominates'
            when msg_bytes is null then 'no_message_size'
            when bandwidth_fraction is null then 'no_link_peak'
            when bandwidth_fraction >= 0.5 then 'link_near_peak'
            else 'neither_dominates'
        end as bound_reason
    from measured
),

final as (
    select
        job_id,
        collective_name,
        dtype,
        msg_bytes,
        pg_name,
        node_span,
        collective_kind,
        group_size,
        instance_count,
        median_latency_us,
        median_bus_gb_per_s,
        peak_bus_gb_per_s,
        bandwidth_fraction,
        median_start_skew_us,
        median_wait_share,
        total_wait_us,
        case bound_reason
            when 'waiting_dominates' then 'skew'
            when 'link_near_peak' then 'bandwidth'
            when 'waiting_at_link_peak' then 'mixed'
            when 'neither_dominates' then 'mixed'
            else 'inconclusive'
        end as bound,
        bound_reason
    from classified
)

select * from final
