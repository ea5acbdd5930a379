{#- One row per collective signature of a job (collective, dtype, message bytes, process group, node
    span): how many instances, their median latency, bus bandwidth and start skew, the waiting they
    cost, the link's peak for the span (interconnect_peaks, the lowest over the job's platforms), and
    the bound, vllm-project/vllm#52777's classes:
    - inconclusive: clocks that could not be aligned (no skew to measure); fewer instances than
      `collective_signature_min_instances` unless their median wait share is above
      `collective_decisive_wait_share` (waiting dwarfs the transfer on every rank: one instance
      of eight ranks already shows it); no message size when waiting does not dominate;
    - skew: waiting dominates (the median wait share, avg_wait / (avg_wait + comm_latency), is above
      `collective_skew_wait_share_min`) and the transfer is below the bandwidth setting;
    - bandwidth: the median bus bandwidth reaches `collective_bandwidth_peak_share_min` of the
      link's peak and waiting does not dominate;
    - mixed: both at once, or neither (the time is partly waiting, partly a transfer below the
      link's limit); inconclusive when waiting does not dominate and the link has no peak.
    Desync instances are left out (their ranks disagree). A view. -#}
{{ config(materialized='view') }}

with instances as (
    select * from {{ ref('collective_instances') }}
    where not is_desync
),

jobs as (
    select * from {{ ref('jobs') }}
),

job_ranks as (
    select * from {{ ref('job_ranks') }}
),

interconnect_peaks as (
    select * from {{ ref('interconnect_peaks') }}
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
        signature_stats.median_wait_share > {{ var('collective_skew_wait_share_min') }} as waiting_dominates
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
            when instance_count < {{ var('collective_signature_min_instances') }}
                and not coalesce(median_wait_share > {{ var('collective_decisive_wait_share') }}, false)
                then 'few_instances'
            when waiting_dominates
                and bandwidth_fraction >= {{ var('collective_bandwidth_peak_share_min') }} then 'waiting_at_link_peak'
            when waiting_dominates then 'waiting_dominates'
            when msg_bytes is null then 'no_message_size'
            when bandwidth_fraction is null then 'no_link_peak'
            when bandwidth_fraction >= {{ var('collective_bandwidth_peak_share_min') }} then 'link_near_peak'
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
