{#- One row per collective signature of a job (collective, dtype, message bytes, process group,
    link): how many instances, their median latency (the fastest rank's duration: the transfer),
    median bus bandwidth against the link's peak (interconnect_peaks, by the job's platform and the
    instances' node span), median start skew, the ranks' total wait, and what bounds it
    (vllm-project/vllm#52777's classes): `skew` when the ranks' mean wait is at least
    var('collective_bound_ratio') times the latency, `bandwidth` when the latency is at least that
    many times the mean wait, `mixed` between, `inconclusive` when the job's clocks are unaligned
    or the median start skew is within the clock uncertainty. Desync instances are left out. A view. -#}
{{ config(materialized='view') }}

with instances as (
    select * from {{ ref('collective_instances') }}
),

jobs as (
    select * from {{ ref('jobs') }}
),

job_ranks as (
    select * from {{ ref('job_ranks') }}
),

peaks as (
    select * from {{ ref('interconnect_peaks') }}
),

job_platforms as (
    select job_id, min(platform) as platform
    from job_ranks
    group by job_id
),

signatures as (
    select
        job_id,
        collective_name,
        dtype,
        msg_bytes,
        pg_name,
        node_span,
        count(*) as instance_count,
        median(comm_latency_us) as median_latency_us,
        median(bus_gb_per_s) as median_bus_gb_per_s,
        median(start_skew_us) as median_start_skew_us,
        median(avg_wait_us) as median_avg_wait_us,
        sum(avg_wait_us * ranks_present) as total_wait_us
    from instances
    where not is_desync
    group by job_id, collective_name, dtype, msg_bytes, pg_name, node_span
),

final as (
    select
        signatures.job_id,
        signatures.collective_name,
        signatures.dtype,
        signatures.msg_bytes,
        signatures.pg_name,
        signatures.node_span,
        signatures.instance_count,
        signatures.median_latency_us,
        signatures.median_bus_gb_per_s,
        peaks.peak_gb_per_s as peak_bus_gb_per_s,
        100.0 * signatures.median_bus_gb_per_s / nullif(peaks.peak_gb_per_s, 0) as pct_of_peak,
        signatures.median_start_skew_us,
        signatures.median_avg_wait_us,
        signatures.total_wait_us,
        case
            when jobs.clock_method = 'unaligned'
                or signatures.median_start_skew_us <= coalesce(jobs.clock_uncertainty_us, 0) then 'inconclusive'
            when signatures.median_avg_wait_us >= {{ var('collective_bound_ratio') }} * signatures.median_latency_us
                then 'skew'
            when signatures.median_latency_us >= {{ var('collective_bound_ratio') }} * signatures.median_avg_wait_us
                then 'bandwidth'
            else 'mixed'
        end as bound
    from signatures
    inner join jobs on signatures.job_id = jobs.job_id
    left join job_platforms on signatures.job_id = job_platforms.job_id
    left join peaks on job_platforms.platform = peaks.platform and signatures.node_span = peaks.link_class
)

select * from final
