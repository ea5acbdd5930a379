

with kernels as (
    select * from "warehouse"."main"."kernels"
    where category = 'kernel'
),

kernel_op_categories as (
    -- the launcher's op category; a compiled region's own kernels under their own categories
    select trace_id, kernel_event_idx, op_category from "warehouse"."intermediate"."int_kernel_op_categories"
),

timeline as (
    select trace_id, total_time_ms from "warehouse"."main"."gpu_timeline"
),

labelled as (
    select
        kernels.trace_id,
        kernels.name as kernel_name,
        kernels.stream,
        kernels.dur_us,
        coalesce(kernels.cpu_op_name, kernels.launch_name) as parent_cpu_op,
        coalesce(
            kernel_op_categories.op_category,
            case
                when kernels.launch_name is null then null
                when lower(kernels.launch_name) like '%cudagraph%' or lower(kernels.launch_name) like '%graphlaunch%' then 'graph'
                else 'runtime'
            end
        ) as parent_op_category
    from kernels
    left join kernel_op_categories
        on kernels.trace_id = kernel_op_categories.trace_id
        and kernels.event_idx = kernel_op_categories.kernel_event_idx
),

grouped as (
    select
        trace_id,
        parent_op_category,
        parent_cpu_op,
        kernel_name,
        stream,
        sum(dur_us) as kernel_duration_sum_us,
        count(*) as kernel_count,
        avg(dur_us) as kernel_duration_mean_us,
        min(dur_us) as kernel_duration_min_us,
        max(dur_us) as kernel_duration_max_us
    from labelled
    group by all
),

final as (
    select
        grouped.trace_id || ':' || md5(coalesce(parent_op_category, '') || coalesce(parent_cpu_op, '') || kernel_name || coalesce(stream::varchar, '')) as kernel_group_key,
        grouped.*,
        100.0 * kernel_duration_sum_us / sum(kernel_duration_sum_us) over (partition by grouped.trace_id) as percent_of_kernel_time,
        100.0 * kernel_duration_sum_us / 1000.0 / timeline.total_time_ms as percent_of_total_time
    from grouped
    left join timeline on grouped.trace_id = timeline.trace_id
)

select * from final
