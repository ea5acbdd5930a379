

with launchers as (
    select * from "warehouse"."intermediate"."int_kernel_launchers"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

signatures as (
    select
        trace_id,
        name,
        op_category,
        coalesce(process_name, '') as process_name,
        coalesce(process_label, '') as process_label,
        coalesce(thread_name, '') as thread_name,
        coalesce(input_dims, '') as input_dims,
        coalesce(input_type, '') as input_type,
        coalesce(input_strides, '') as input_strides,
        coalesce(concrete_inputs, '') as concrete_inputs,
        kernel_count as num_kernels,
        count(*) as operation_count,
        avg(direct_kernel_time_us) as direct_kernel_time_mean_us,
        median(direct_kernel_time_us) as direct_kernel_time_median_us,
        stddev_samp(direct_kernel_time_us) as direct_kernel_time_std_us,
        min(direct_kernel_time_us) as direct_kernel_time_min_us,
        max(direct_kernel_time_us) as direct_kernel_time_max_us,
        sum(direct_kernel_time_us) as direct_kernel_time_sum_us,
        avg(subtree_kernel_time_us) as subtree_kernel_time_mean_us,
        median(subtree_kernel_time_us) as subtree_kernel_time_median_us,
        stddev_samp(subtree_kernel_time_us) as subtree_kernel_time_std_us,
        min(subtree_kernel_time_us) as subtree_kernel_time_min_us,
        max(subtree_kernel_time_us) as subtree_kernel_time_max_us,
        sum(subtree_kernel_time_us) as subtree_kernel_time_sum_us,
        min(launcher_event_idx) as example_op_id,
        arg_min(kernel_names, launcher_event_idx) as kernel_names
    from launchers
    group by all
),

final as (
    select
        trace_id || ':' || md5(name || op_category || process_name || process_label || thread_name || input_dims
            || input_type || input_strides || concrete_inputs || num_kernels) as op_args_key,
        *,
        100.0 * direct_kernel_time_sum_us / sum(direct_kernel_time_sum_us) over (partition by trace_id) as percentage,
        100.0 * sum(direct_kernel_time_sum_us) over (
            partition by trace_id order by direct_kernel_time_sum_us desc, example_op_id
            rows between unbounded preceding and current row
        ) / sum(direct_kernel_time_sum_us) over (partition by trace_id) as cumulative_percentage
    from signatures
)

select * from final
