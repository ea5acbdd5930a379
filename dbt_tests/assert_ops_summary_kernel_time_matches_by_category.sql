{#- ops_summary and ops_summary_by_category group the same kernel launchers, so per trace the
    summed total_direct_kernel_time_us of ops_summary equals the summed
    total_direct_kernel_time_ms of ops_summary_by_category, in µs (1e-6 relative tolerance), and
    both have the same traces. Returns the traces that break this. -#}
with by_name as (
    select
        trace_id,
        sum(total_direct_kernel_time_us) as by_name_kernel_time_us
    from {{ ref('ops_summary') }}
    group by trace_id
),

by_category as (
    select
        trace_id,
        sum(total_direct_kernel_time_ms) * 1000.0 as by_category_kernel_time_us
    from {{ ref('ops_summary_by_category') }}
    group by trace_id
),

compared as (
    select
        coalesce(by_name.trace_id, by_category.trace_id) as trace_id,
        by_name.by_name_kernel_time_us,
        by_category.by_category_kernel_time_us
    from by_name
    full outer join by_category on by_name.trace_id = by_category.trace_id
)

select *
from compared
where by_name_kernel_time_us is null
    or by_category_kernel_time_us is null
    or abs(by_name_kernel_time_us - by_category_kernel_time_us)
        > 1e-6 * greatest(abs(by_name_kernel_time_us), abs(by_category_kernel_time_us))
