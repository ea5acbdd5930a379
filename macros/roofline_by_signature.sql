{#- Per-signature kernel-time statistics and the roofline on every platform, from op
    instances with kernel_time_us, duration_us, flops, bytes, compute_spec, perf_params,
    has_perf_model, module_chain, op_id and instance_key. `signature` lists the grouping
    columns (text columns, NULLs grouped as ''). Per-instance throughput and roofline
    percentages are constants over the instance's kernel time, so their statistics follow
    from those of 1 / kernel time. -#}
{% macro roofline_by_signature(instances, signature) -%}
with signatures as (
    select
        trace_id,
        {%- for column in signature %}
        coalesce({{ column }}, '') as {{ column }},
        {%- endfor %}
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
        {%- if 'perf_params' not in signature %}
        arg_min(perf_params, instance_key) as perf_params,
        {%- endif %}
        arg_min(module_chain, instance_key) as module_chain
    from {{ instances }}
    group by trace_id{% for column in signature %}, coalesce({{ column }}, ''){% endfor %}
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
    inner join {{ ref('int_trace_platforms') }} as trace_platforms on signatures.trace_id = trace_platforms.trace_id
    cross join {{ ref('platforms') }} as platforms
    left join {{ ref('platform_peaks') }} as platform_peaks
        on platforms.platform = platform_peaks.platform
        and signatures.compute_spec = platform_peaks.compute_spec
    -- FP4 weights on a platform without FP4 matrix cores (MI300X) are dequantized and multiplied at
    -- BF16, as the vLLM decode's Triton MoE kernels `..._bf16xbf16xmxfp4` do; TraceLens leaves such
    -- ops without a roofline (docs/divergences.md)
    left join {{ ref('platform_peaks') }} as weight_only_peaks
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
    {{ op_signature_key('trace_id', 'platform', signature) }} as signature_key,
    trace_id,
    platform,
    is_trace_platform,
    {%- for column in signature %}
    {{ column }},
    {%- endfor %}
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
    {%- if 'perf_params' not in signature %}
    perf_params,
    {%- endif %}
    {%- for stat in ['mean', 'median', 'std', 'min', 'max'] %}
    flops / 1e9 * 1e3 * inverse_time_{{ stat }} as tflops_per_s_{{ stat }},
    bytes / 1e6 * inverse_time_{{ stat }} as tb_per_s_{{ stat }},
    100.0 * roofline_time_us * inverse_time_{{ stat }} as pct_roofline_{{ stat }},
    {%- endfor %}
    roofline_time_us,
    case
        when roofline_time_us is null then null
        when compute_time_us >= memory_time_us then 'COMPUTE_BOUND'
        else 'MEMORY_BOUND'
    end as roofline_bound
from with_roofline
{%- endmacro %}
