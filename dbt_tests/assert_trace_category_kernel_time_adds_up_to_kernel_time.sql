{#- trace_category_kernel_time: per trace the categories add up to the summed durations of all its
    GPU kernels (kernels, linked or not; within 1e-6 ms), and its collectives row to those of its
    communication kernels. Returns the traces that break it. -#}
with kernels as (
    select * from {{ ref('kernels') }}
),

category_time as (
    select * from {{ ref('trace_category_kernel_time') }}
),

kernel_time as (
    select
        trace_id,
        sum(dur_us) / 1000.0 as kernel_time_ms,
        coalesce(sum(dur_us) filter (where is_comm), 0) / 1000.0 as comm_kernel_time_ms
    from kernels
    group by trace_id
),

category_sums as (
    select
        trace_id,
        sum(kernel_time_ms) as kernel_time_ms,
        coalesce(sum(kernel_time_ms) filter (where category = 'collectives'), 0) as collectives_ms
    from category_time
    group by trace_id
),

compared as (
    select
        coalesce(kernel_time.trace_id, category_sums.trace_id) as trace_id,
        category_sums.kernel_time_ms - kernel_time.kernel_time_ms as total_diff_ms,
        category_sums.collectives_ms - kernel_time.comm_kernel_time_ms as collectives_diff_ms
    from kernel_time
    full outer join category_sums on category_sums.trace_id = kernel_time.trace_id
)

select *
from compared
where total_diff_ms is null or abs(total_diff_ms) > 1e-6 or abs(collectives_diff_ms) > 1e-6
