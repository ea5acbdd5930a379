

with instances as (
    select
        trace_id,
        unified_op_key,
        coalesce(name, '') as name,
        coalesce(op_category, '') as op_category,
        coalesce(process_name, '') as process_name,
        coalesce(process_label, '') as process_label,
        coalesce(thread_name, '') as thread_name,
        coalesce(input_dims, '') as input_dims,
        coalesce(input_type, '') as input_type,
        coalesce(input_strides, '') as input_strides,
        coalesce(concrete_inputs, '') as concrete_inputs
    from "warehouse"."main"."op_perf_instances"
),

instance_kernels as (
    select * from "warehouse"."intermediate"."int_op_instance_kernels"
),

kernels as (
    select * from "warehouse"."main"."kernels"
),

platforms as (
    select platform from "warehouse"."main"."platforms"
),

final as (
    select
        instances.trace_id || ':' || platforms.platform || ':' || md5(instances.name || '|' || instances.op_category || '|' || instances.process_name || '|' || instances.process_label || '|' || instances.thread_name || '|' || instances.input_dims || '|' || instances.input_type || '|' || instances.input_strides || '|' || instances.concrete_inputs) as signature_key,
        instances.trace_id,
        platforms.platform,
        instances.unified_op_key,
        kernels.event_idx,
        kernels.name as kernel_name,
        kernels.dur_us,
        kernels.kernel_category,
        kernels.kernel_type,
        kernels.library,
        kernels.kernel_precision
    from instances
    inner join instance_kernels
        on instances.trace_id = instance_kernels.trace_id
        and instances.unified_op_key = instance_kernels.unified_op_key
    inner join kernels
        on instance_kernels.trace_id = kernels.trace_id
        and instance_kernels.event_idx = kernels.event_idx
    cross join platforms
)

select * from final
