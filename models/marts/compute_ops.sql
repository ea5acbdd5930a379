{#- The op_perf rows as the compute agents read them (on every platform op_perf lists): each op
    signature with its platform's peaks, its roofline bound in words, the library of most of its
    kernel time and its GPU event count. Only the analyzers read it, one trace at a time. -#}
{{ config(materialized='view') }}

with op_perf as (
    select * from {{ ref('op_perf') }}
),

op_perf_kernels as (
    select * from {{ ref('op_perf_kernels') }}
),

platform_peaks as (
    select * from {{ ref('platform_peaks') }}
),

platforms as (
    select * from {{ ref('platforms') }}
),

library_time as (
    -- kernels whose taxonomy names no library do not vote
    select trace_id, platform, signature_key, library, sum(dur_us) as library_time_us
    from op_perf_kernels
    where library not in ('unknown', 'runtime', '')
    group by trace_id, platform, signature_key, library
),

ranked_libraries as (
    select
        trace_id,
        platform,
        signature_key,
        library,
        row_number() over (
            partition by trace_id, platform, signature_key order by library_time_us desc, library
        ) as library_rank
    from library_time
),

kernel_libraries as (
    select trace_id, platform, signature_key, library
    from ranked_libraries
    where library_rank = 1
),

op_name_libraries as (
    -- an op none of whose kernels names a library: the library its name states (TraceLens
    -- classify_kernel_library's op-name rules, first match wins)
    select
        signature_key,
        trace_id,
        platform,
        case
            when position('aiter::' in lower(name)) > 0 then 'aiter'
            when position('rocm_aiter' in lower(name)) > 0 then 'aiter'
            when position('fbgemm' in lower(name)) > 0 then 'FBGEMM'
            when position('miopen' in lower(name)) > 0 then 'MIOpen'
            when position('triton' in lower(name)) > 0 then 'Triton'
        end as library
    from op_perf
),

kernel_counts as (
    select trace_id, platform, signature_key, count(*) as kernel_count
    from op_perf_kernels
    group by trace_id, platform, signature_key
),

final as (
    select
        op_perf.signature_key,
        op_perf.trace_id,
        op_perf.platform,
        op_perf.name,
        op_perf.op_category,
        op_perf.input_dims,
        op_perf.input_type,
        op_perf.input_strides,
        op_perf.concrete_inputs,
        op_perf.operation_count,
        op_perf.kernel_time_sum_us,
        op_perf.kernel_time_mean_us,
        op_perf.has_perf_model,
        op_perf.gflops,
        op_perf.data_moved_mib,
        op_perf.flops_per_byte,
        op_perf.compute_spec,
        op_perf.perf_params,
        op_perf.tflops_per_s_mean,
        op_perf.tb_per_s_mean,
        op_perf.pct_roofline_mean,
        op_perf.roofline_time_us,
        op_perf.roofline_bound,
        case op_perf.roofline_bound
            when 'COMPUTE_BOUND' then 'compute'
            when 'MEMORY_BOUND' then 'memory'
        end as bound,
        op_perf.module_chain,
        op_perf.example_op_id,
        platform_peaks.peak_tflops,
        platforms.mem_bw_gbps / 1000.0 as peak_tb_per_s,
        coalesce(kernel_libraries.library, op_name_libraries.library, 'Unknown') as library,
        coalesce(kernel_counts.kernel_count, 0) as kernel_count
    from op_perf
    left join platform_peaks
        on op_perf.platform = platform_peaks.platform
        and op_perf.compute_spec = platform_peaks.compute_spec
    left join platforms
        on op_perf.platform = platforms.platform
    left join kernel_libraries
        on op_perf.trace_id = kernel_libraries.trace_id
        and op_perf.platform = kernel_libraries.platform
        and op_perf.signature_key = kernel_libraries.signature_key
    left join op_name_libraries
        on op_perf.trace_id = op_name_libraries.trace_id
        and op_perf.platform = op_name_libraries.platform
        and op_perf.signature_key = op_name_libraries.signature_key
    left join kernel_counts
        on op_perf.trace_id = kernel_counts.trace_id
        and op_perf.platform = kernel_counts.platform
        and op_perf.signature_key = kernel_counts.signature_key
)

select * from final
