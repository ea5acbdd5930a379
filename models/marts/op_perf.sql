{#- One row per op signature (name, category, thread, input shapes/types/strides/concrete
    inputs) and platform: kernel-time statistics, FLOPs, bytes and the roofline (TraceLens
    unified_perf_summary). Every platform in seeds/platforms.csv is listed;
    `is_trace_platform` marks the one the trace ran on. A view over op_perf_instances. -#}
{{ config(materialized='view') }}

with instances as (
    select * from {{ ref('op_perf_instances') }}
),

trace_platforms as (
    select * from {{ ref('int_trace_platforms') }}
),

platforms as (
    select * from {{ ref('platforms') }}
),

platform_peaks as (
    select * from {{ ref('platform_peaks') }}
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
        min(op_id) as example_op_id,
        min(unified_op_key) as example_op_key,
        count(*) as operation_count,
        sum(duration_us) as total_duration_us,
        avg(duration_us) as mean_duration_us,
        stddev_samp(duration_us) as std_duration_us,
        sum(kernel_time_us) as kernel_time_sum_us,
        avg(kernel_time_us) as kernel_time_mean_us,
        median(kernel_time_us) as kernel_time_median_us,
        stddev_samp(kernel_time_us) as kernel_time_std_us,
        min(kernel_time_us) as kernel_time_min_us,
        max(kernel_time_us) as kernel_time_max_us,
        -- per-instance throughput and roofline percentages are constants divided by the
        -- instance's kernel time, so their statistics follow from those of 1 / time
        avg(1.0 / nullif(kernel_time_us, 0)) as inverse_time_mean,
        median(1.0 / nullif(kernel_time_us, 0)) as inverse_time_median,
        stddev_samp(1.0 / nullif(kernel_time_us, 0)) as inverse_time_std,
        min(1.0 / nullif(kernel_time_us, 0)) as inverse_time_min,
        max(1.0 / nullif(kernel_time_us, 0)) as inverse_time_max,
        bool_or(has_perf_model) as has_perf_model,
        arg_min(flops, unified_op_key) as flops,
        arg_min(bytes, unified_op_key) as bytes,
        arg_min(compute_spec, unified_op_key) as compute_spec,
        arg_min(perf_params, unified_op_key) as perf_params,
        any_value(module_chain) as module_chain
    from instances
    group by all
),

with_platforms as (
    select
        signatures.*,
        platforms.platform,
        platforms.platform = trace_platforms.platform as is_trace_platform,
        platforms.mem_bw_gbps,
        platform_peaks.peak_tflops,
        signatures.flops / nullif(platform_peaks.peak_tflops * 1e12, 0) * 1e6 as compute_time_us,
        signatures.bytes / nullif(platforms.mem_bw_gbps * 1e9, 0) * 1e6 as memory_time_us
    from signatures
    inner join trace_platforms on signatures.trace_id = trace_platforms.trace_id
    cross join platforms
    left join platform_peaks
        on platforms.platform = platform_peaks.platform
        and signatures.compute_spec = platform_peaks.compute_spec
),

final as (
    select
        trace_id || ':' || platform || ':' || md5(name || op_category || process_name || process_label || thread_name
            || input_dims || input_type || input_strides || concrete_inputs) as op_signature_key,
        trace_id,
        platform,
        is_trace_platform,
        name,
        op_category,
        process_name,
        process_label,
        thread_name,
        input_dims,
        input_type,
        input_strides,
        concrete_inputs,
        module_chain,
        example_op_id,
        operation_count,
        total_duration_us,
        mean_duration_us,
        std_duration_us,
        kernel_time_sum_us,
        kernel_time_mean_us,
        kernel_time_median_us,
        kernel_time_std_us,
        kernel_time_min_us,
        kernel_time_max_us,
        has_perf_model,
        flops / 1e9 as gflops,
        bytes / 1048576.0 as data_moved_mib,
        flops / nullif(bytes, 0) as flops_per_byte,
        compute_spec,
        perf_params,
        flops / 1e9 * 1e3 * inverse_time_mean as tflops_per_s_mean,
        flops / 1e9 * 1e3 * inverse_time_median as tflops_per_s_median,
        flops / 1e9 * 1e3 * inverse_time_std as tflops_per_s_std,
        flops / 1e9 * 1e3 * inverse_time_min as tflops_per_s_min,
        flops / 1e9 * 1e3 * inverse_time_max as tflops_per_s_max,
        bytes / 1e6 * inverse_time_mean as tb_per_s_mean,
        bytes / 1e6 * inverse_time_median as tb_per_s_median,
        bytes / 1e6 * inverse_time_std as tb_per_s_std,
        bytes / 1e6 * inverse_time_min as tb_per_s_min,
        bytes / 1e6 * inverse_time_max as tb_per_s_max,
        case when flops > 0 then greatest(compute_time_us, memory_time_us) end as roofline_time_us,
        case
            when flops > 0 and compute_time_us >= memory_time_us then 'COMPUTE_BOUND'
            when flops > 0 then 'MEMORY_BOUND'
        end as roofline_bound,
        case when flops > 0 then 100.0 * greatest(compute_time_us, memory_time_us) * inverse_time_mean end as pct_roofline_mean,
        case when flops > 0 then 100.0 * greatest(compute_time_us, memory_time_us) * inverse_time_median end as pct_roofline_median,
        case when flops > 0 then 100.0 * greatest(compute_time_us, memory_time_us) * inverse_time_std end as pct_roofline_std,
        case when flops > 0 then 100.0 * greatest(compute_time_us, memory_time_us) * inverse_time_min end as pct_roofline_min,
        case when flops > 0 then 100.0 * greatest(compute_time_us, memory_time_us) * inverse_time_max end as pct_roofline_max
    from with_platforms
)

select * from final
