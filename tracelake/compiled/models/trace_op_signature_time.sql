

with op_perf as (
    select * from "warehouse"."main"."op_perf"
),

trace_platform as (
    select trace_id, coalesce(min(platform) filter (where is_trace_platform), min(platform)) as platform
    from op_perf
    group by trace_id
),

final as (
    select
        op_perf.trace_id,
        op_perf.name,
        op_perf.input_dims,
        op_perf.input_type,
        op_perf.input_strides,
        op_perf.concrete_inputs,
        min(op_perf.op_category) as op_category,
        sum(op_perf.operation_count) as calls,
        sum(op_perf.kernel_time_sum_us) / 1000.0 as kernel_time_ms
    from op_perf
    inner join trace_platform
        on trace_platform.trace_id = op_perf.trace_id and trace_platform.platform = op_perf.platform
    group by
        op_perf.trace_id, op_perf.name, op_perf.input_dims, op_perf.input_type, op_perf.input_strides,
        op_perf.concrete_inputs
)

select * from final
