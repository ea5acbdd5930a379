{#- The dashboard's per-job chart: kernel time per category of each rank (trace_category_kernel_time:
    every GPU kernel once, `collectives` among them), the job's largest categories by name and the rest summed
    into one, as run_group_categories does for runs. A view. -#}
{{ config(materialized='view') }}

with job_ranks as (
    select * from {{ ref('job_ranks') }}
),

category_time as (
    select * from {{ ref('trace_category_kernel_time') }}
),

rank_category_time as (
    select job_ranks.job_id, job_ranks.rank, category_time.category, category_time.kernel_time_ms
    from job_ranks
    inner join category_time on category_time.trace_id = job_ranks.trace_id
),

category_ranks as (
    select
        job_id,
        category,
        row_number() over (partition by job_id order by sum(kernel_time_ms) desc, category) as category_rank
    from rank_category_time
    group by job_id, category
),

charted as (
    select
        rank_category_time.job_id,
        rank_category_time.rank,
        case
            when category_ranks.category_rank <= {{ var('dashboard_chart_categories') }} then rank_category_time.category
            else '{{ var("dashboard_rest_category") }}'
        end as category,
        min(category_ranks.category_rank) as category_rank,
        sum(rank_category_time.kernel_time_ms) as kernel_time_ms
    from rank_category_time
    inner join category_ranks
        on category_ranks.job_id = rank_category_time.job_id
        and category_ranks.category = rank_category_time.category
    group by all
),

final as (
    select
        job_id,
        rank,
        category,
        category_rank,
        kernel_time_ms,
        100 * kernel_time_ms / nullif(sum(kernel_time_ms) over (partition by job_id, rank), 0) as percent
    from charted
)

select * from final
