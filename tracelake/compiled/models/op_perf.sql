

with instances as (
    select *, unified_op_key as instance_key from "warehouse"."main"."op_perf_instances"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

final as (
    with signatures as (
    select
        trace_id,
        coalesce(name, '') as name,
        coalesce(op_category, '') as op_category,
        coalesce(process_name, '') as process_name,
        coalesce(process_label, '') as process_label,
        coalesce(thread_name, '') as thread_name,
        coalesce(input_dims, '') as input_dims,
        coalesce(input_type, '') as input_type,
        coalesce(input_strides, '') as input_strides,
        coalesce(concrete_inputs, '') as concrete_inputs,
        min(op_id) as example_op_id,
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
        avg(1.0 / nullif(kernel_time_us, 0)) as inverse_time_mean,
        median(1.0 / nullif(kernel_time_us, 0)) as inverse_time_median,
        stddev_samp(1.0 / nullif(kernel_time_us, 0)) as inverse_time_std,
        min(1.0 / nullif(kernel_time_us, 0)) as inverse_time_min,
        max(1.0 / nullif(kernel_time_us, 0)) as inverse_time_max,
        bool_or(has_perf_model) as has_perf_model,
        arg_min(flops, instance_key) as flops,
        arg_min(bytes, instance_key) as bytes,
        arg_min(compute_spec, instance_key) as compute_spec,
        arg_min(perf_params, instance_key) as perf_params,
        arg_min(module_chain, instance_key) as module_chain
    from instances
    group by trace_id, coalesce(name, ''), coalesce(op_category, ''), coalesce(process_name, ''), coalesce(process_label, ''), coalesce(thread_name, ''), coalesce(input_dims, ''), coalesce(input_type, ''), coalesce(input_strides, ''), coalesce(concrete_inputs, '')
),

with_platforms as (
    select
        signatures.*,
        platforms.platform,
        platforms.platform = trace_platforms.platform as is_trace_platform,
        signatures.flops / nullif(coalesce(platform_peaks.peak_tflops, weight_only_peaks.peak_tflops) * 1e12, 0) * 1e6
            as compute_time_us,
        signatures.bytes / nullif(platforms.mem_bw_gbps * 1e9, 0) * 1e6 as memory_time_us
    from signatures
    inner join "warehouse"."intermediate"."int_trace_platforms" as trace_platforms on signatures.trace_id = trace_platforms.trace_id
    cross join "warehouse"."main"."platforms" as platforms
    left join "warehouse"."main"."platform_peaks" as platform_peaks
        on platforms.platform = platform_peaks.platform
        and signatures.compute_spec = platform_peaks.compute_spec
    -- FP4 weights on a platform without FP4 matrix cores (MI300X) are dequantized and multiplied at
    -- BF16, as the vLLM decode's Triton MoE kernels `..._bf16xbf16xmxfp4` do; TraceLens leaves such
    -- ops without a roofline (docs/divergences.md)
    left join "warehouse"."main"."platform_peaks" as weight_only_peaks
        on platforms.platform = weight_only_peaks.platform
        and signatures.compute_spec = 'matrix_fp4'
        and weight_only_peaks.compute_spec = 'matrix_bf16'
),

with_roofline as (
    select
        *,
        -- TraceLens: a roofline only when FLOPs > 0 and both the compute peak for the op's
        -- spec and the bytes are known (greatest() would silently skip a missing one)
        case
            when flops > 0 and compute_time_us is not null and memory_time_us is not null
                then greatest(compute_time_us, memory_time_us)
        end as roofline_time_us
    from with_platforms
)

select
    trace_id || ':' || platform || ':' || md5(name || '|' || op_category || '|' || process_name || '|' || process_label || '|' || thread_name || '|' || input_dims || '|' || input_type || '|' || input_strides || '|' || concrete_inputs) as signature_key,
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
    bytes / 1e6 * inverse_time_mean as tb_per_s_mean,
    100.0 * roofline_time_us * inverse_time_mean as pct_roofline_mean,
    flops / 1e9 * 1e3 * inverse_time_median as tflops_per_s_median,
    bytes / 1e6 * inverse_time_median as tb_per_s_median,
    100.0 * roofline_time_us * inverse_time_median as pct_roofline_median,
    flops / 1e9 * 1e3 * inverse_time_std as tflops_per_s_std,
    bytes / 1e6 * inverse_time_std as tb_per_s_std,
    100.0 * roofline_time_us * inverse_time_std as pct_roofline_std,
    flops / 1e9 * 1e3 * inverse_time_min as tflops_per_s_min,
    bytes / 1e6 * inverse_time_min as tb_per_s_min,
    100.0 * roofline_time_us * inverse_time_min as pct_roofline_min,
    flops / 1e9 * 1e3 * inverse_time_max as tflops_per_s_max,
    bytes / 1e6 * inverse_time_max as tb_per_s_max,
    100.0 * roofline_time_us * inverse_time_max as pct_roofline_max,
    roofline_time_us,
    case
        when roofline_time_us is null then null
        when compute_time_us >= memory_time_us then 'COMPUTE_BOUND'
        else 'MEMORY_BOUND'
    end as roofline_bound
from with_roofline
)

select * from final
