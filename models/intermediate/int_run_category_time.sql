{#- Kernel time per category of each run of the dashboard's run groups: the mean over the run's
    traces with a GPU timeline (the ranks of one job). The categories are compare's
    (trace_category_kernel_time): the op categories, `collectives` (every communication kernel) and
    the kernels no op categorizes, so a run's categories add up to all its kernel time. -#}

with run_groups as (
    select * from {{ ref('run_groups') }}
),

category_time as (
    select * from {{ ref('trace_category_kernel_time') }}
),

final as (
    select
        run_groups.group_key,
        run_groups.run_index,
        category_time.category as op_category,
        sum(category_time.kernel_time_ms) / any_value(run_groups.run_gpu_trace_count) as kernel_time_ms
    from run_groups
    inner join category_time on category_time.trace_id = run_groups.trace_id
    where run_groups.has_gpu_timeline
    group by run_groups.group_key, run_groups.run_index, category_time.category
)

select * from final
