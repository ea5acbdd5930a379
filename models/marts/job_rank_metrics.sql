{#- One row per rank of a job with what the dashboard, `compare` and the Python API spread over the
    ranks: its step time (the median span of its ProfilerStep#N, else its GPU timeline's total),
    its collective kernel time and its wait for the other ranks (job_straggler_summary, TraceLens'
    total_nccl_dur_us and total wait), and its kernel time (trace_category_kernel_time, every
    GPU kernel once, the collectives included). A view. -#}
{{ config(materialized='view') }}

with job_ranks as (
    select * from {{ ref('job_ranks') }}
),

stragglers as (
    select * from {{ ref('job_straggler_summary') }}
),

profiler_steps as (
    select * from {{ ref('profiler_steps') }}
),

gpu_timeline as (
    select * from {{ ref('gpu_timeline') }}
),

category_time as (
    select * from {{ ref('trace_category_kernel_time') }}
),

step_spans as (
    select
        trace_id,
        count(*) as step_count,
        median((span_end_us - span_start_us) / 1000.0) as median_step_time_ms
    from profiler_steps
    group by trace_id
),

kernel_time as (
    select
        trace_id,
        sum(kernel_time_ms) as kernel_time_ms,
        sum(kernel_time_ms) filter (where category = 'collectives') as collective_kernel_time_ms
    from category_time
    group by trace_id
),

final as (
    select
        job_ranks.job_id,
        job_ranks.rank,
        job_ranks.trace_id,
        job_ranks.file_name,
        job_ranks.node_id,
        coalesce(step_spans.median_step_time_ms, gpu_timeline.total_time_ms) as step_time_ms,
        case
            when step_spans.trace_id is not null then 'profiler_steps'
            when gpu_timeline.trace_id is not null then 'gpu_timeline'
        end as step_time_source,
        coalesce(step_spans.step_count, 0) as step_count,
        coalesce(stragglers.total_comm_us, 0) / 1000.0 as communication_ms,
        coalesce(stragglers.total_wait_us, 0) / 1000.0 as wait_ms,
        coalesce(stragglers.num_collectives, 0) as collective_count,
        coalesce(stragglers.times_arrived_last, 0) as times_arrived_last,
        coalesce(kernel_time.kernel_time_ms, 0.0) as kernel_time_ms,
        coalesce(kernel_time.collective_kernel_time_ms, 0.0) as collective_kernel_time_ms,
        100.0 * coalesce(kernel_time.collective_kernel_time_ms, 0.0)
            / nullif(kernel_time.kernel_time_ms, 0) as collective_kernel_time_percent
    from job_ranks
    left join step_spans on step_spans.trace_id = job_ranks.trace_id
    left join gpu_timeline on gpu_timeline.trace_id = job_ranks.trace_id
    left join stragglers on stragglers.job_id = job_ranks.job_id and stragglers.rank = job_ranks.rank
    left join kernel_time on kernel_time.trace_id = job_ranks.trace_id
)

select * from final
