{#- The spread of a job's ranks, one row per job and metric of job_rank_metrics (step time,
    communication, wait, kernel time): min / median / max over the ranks and the ranks at the ends
    (ties: the lowest rank). A view. -#}
{{ config(materialized='view') }}

with rank_metrics as (
    select * from {{ ref('job_rank_metrics') }}
),

long_metrics as (
    select job_id, rank, 'step_time' as metric, step_time_ms as value_ms from rank_metrics
    union all
    select job_id, rank, 'communication' as metric, communication_ms as value_ms from rank_metrics
    union all
    select job_id, rank, 'wait' as metric, wait_ms as value_ms from rank_metrics
    union all
    select job_id, rank, 'kernel_time' as metric, kernel_time_ms as value_ms from rank_metrics
),

final as (
    select
        job_id,
        metric,
        count(value_ms) as rank_count,
        min(value_ms) as min_ms,
        median(value_ms) as median_ms,
        max(value_ms) as max_ms,
        arg_min(rank, (value_ms, rank)) as min_rank,
        arg_max(rank, (value_ms, -rank)) as max_rank
    from long_metrics
    where value_ms is not null
    group by job_id, metric
)

select * from final
