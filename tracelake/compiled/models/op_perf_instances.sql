

with unified_ops as (
    select * from "warehouse"."intermediate"."int_unified_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

perf_models as (
    select * from "warehouse"."intermediate"."int_op_perf_models"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

thread_labels as (
    select * from "warehouse"."intermediate"."int_thread_labels"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

final as (
    select
        unified_ops.unified_op_key,
        unified_ops.trace_id,
        unified_ops.op_id,
        unified_ops.name,
        unified_ops.op_category,
        unified_ops.is_synthetic,
        thread_labels.process_name,
        thread_labels.process_label,
        thread_labels.thread_name,
        unified_ops.input_dims,
        unified_ops.input_type,
        unified_ops.input_strides,
        unified_ops.concrete_inputs,
        unified_ops.module_chain,
        unified_ops.duration_us,
        unified_ops.kernel_time_us,
        unified_ops.kernel_count,
        perf_models.op_id is not null and perf_models.flops is not null and not unified_ops.is_synthetic as has_perf_model,
        case when not unified_ops.is_synthetic then perf_models.flops end as flops,
        case when not unified_ops.is_synthetic then perf_models.bytes end as bytes,
        case when not unified_ops.is_synthetic then perf_models.compute_spec end as compute_spec,
        case when not unified_ops.is_synthetic then perf_models.perf_params end as perf_params
    from unified_ops
    left join perf_models
        on unified_ops.trace_id = perf_models.trace_id
        and unified_ops.op_id = perf_models.op_id
    left join thread_labels
        on unified_ops.trace_id = thread_labels.trace_id
        and unified_ops.pid = thread_labels.pid
        and unified_ops.tid = thread_labels.tid
)

select * from final
