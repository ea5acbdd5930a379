

with op_perf as (
    select * from "warehouse"."main"."op_perf"
),

op_signature_kernels as (
    select * from "warehouse"."main"."op_signature_kernels"
),

platform_peaks as (
    select * from "warehouse"."main"."platform_peaks"
),

platforms as (
    select * from "warehouse"."main"."platforms"
),

library_kernels as (
    select
        trace_id,
        platform,
        signature_key,
        library,
        coalesce(library, '') not in ('unknown', 'runtime', '') as names_a_library,
        sum(time_us) as library_time_us,
        sum(kernel_count) as kernel_count
    from op_signature_kernels
    group by trace_id, platform, signature_key, library
),

ranked_libraries as (
    -- kernels whose taxonomy names no library do not vote: they rank after every library that does
    select
        trace_id,
        platform,
        signature_key,
        library,
        names_a_library,
        sum(kernel_count) over (partition by trace_id, platform, signature_key) as signature_kernel_count,
        row_number() over (
            partition by trace_id, platform, signature_key
            order by names_a_library desc, library_time_us desc, library
        ) as library_rank
    from library_kernels
),

signature_kernels as (
    select
        trace_id,
        platform,
        signature_key,
        signature_kernel_count as kernel_count,
        case when names_a_library then library end as kernel_library
    from ranked_libraries
    where library_rank = 1
),

ops_with_name_library as (
    -- the library an op's name states (TraceLens classify_kernel_library's op-name rules, first
    -- match wins): an op none of whose kernels names a library is said to use it
    select
        *,
        case
            when position('aiter::' in lower(name)) > 0 then 'aiter'
            when position('rocm_aiter' in lower(name)) > 0 then 'aiter'
            when position('fbgemm' in lower(name)) > 0 then 'FBGEMM'
            when position('miopen' in lower(name)) > 0 then 'MIOpen'
            when position('triton' in lower(name)) > 0 then 'Triton'
        end as op_name_library
    from op_perf
),

final as (
    select
        ops.signature_key,
        ops.trace_id,
        ops.platform,
        ops.name,
        ops.op_category,
        ops.input_dims,
        ops.input_type,
        ops.input_strides,
        ops.concrete_inputs,
        ops.operation_count,
        ops.kernel_time_sum_us,
        ops.kernel_time_mean_us,
        ops.has_perf_model,
        ops.gflops,
        ops.data_moved_mib,
        ops.flops_per_byte,
        ops.compute_spec,
        ops.perf_params,
        ops.tflops_per_s_mean,
        ops.tb_per_s_mean,
        ops.pct_roofline_mean,
        ops.roofline_time_us,
        ops.roofline_bound,
        case ops.roofline_bound
            when 'COMPUTE_BOUND' then 'compute'
            when 'MEMORY_BOUND' then 'memory'
        end as bound,
        ops.module_chain,
        ops.example_op_id,
        platform_peaks.peak_tflops,
        platforms.mem_bw_gbps / 1000.0 as peak_tb_per_s,
        coalesce(signature_kernels.kernel_library, ops.op_name_library, 'Unknown') as library,
        coalesce(signature_kernels.kernel_count, 0) as kernel_count
    from ops_with_name_library as ops
    left join platform_peaks
        on ops.platform = platform_peaks.platform
        and ops.compute_spec = platform_peaks.compute_spec
    left join platforms
        on ops.platform = platforms.platform
    left join signature_kernels
        on ops.trace_id = signature_kernels.trace_id
        and ops.platform = signature_kernels.platform
        and ops.signature_key = signature_kernels.signature_key
)

select * from final
