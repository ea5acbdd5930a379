

with op_perf_kernels as (
    select * from "warehouse"."main"."op_perf_kernels"
),

kernels_by_name as (
    select
        signature_key,
        trace_id,
        platform,
        kernel_name,
        kernel_category,
        kernel_type,
        library,
        kernel_precision,
        count(*) as kernel_count,
        sum(dur_us) as time_us
    from op_perf_kernels
    group by signature_key, trace_id, platform, kernel_name, kernel_category, kernel_type, library, kernel_precision
),

final as (
    select
        signature_key,
        trace_id,
        platform,
        kernel_name,
        kernel_category,
        kernel_type,
        library,
        kernel_precision,
        kernel_count,
        time_us,
        -- transpose and layout-conversion kernels (names as cuDNN, MIOpen and PyTorch spell them)
        (
            position('transpose' in lower(kernel_name)) > 0
            or position('nchw' in lower(kernel_name)) > 0
            or position('nhwc' in lower(kernel_name)) > 0
            or position('cnhw' in lower(kernel_name)) > 0
        ) as is_layout_kernel
    from kernels_by_name
)

select * from final
