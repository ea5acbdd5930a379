

with cpu_ops as (
    select * from "warehouse"."main"."cpu_ops"
),

op_perf_instances as (
    select * from "warehouse"."main"."op_perf_instances"
    where not is_synthetic
),

final as (
    select
        cpu_ops.trace_id,
        cpu_ops.op_id,
        cpu_ops.name,
        cpu_ops.parent_id,
        cpu_ops.module_chain,
        cpu_ops.pass,
        op_perf_instances.flops,
        op_perf_instances.bytes,
        op_perf_instances.compute_spec,
        op_perf_instances.input_dims
    from cpu_ops
    left join op_perf_instances
        on cpu_ops.trace_id = op_perf_instances.trace_id
        and cpu_ops.op_id = op_perf_instances.op_id
)

select * from final
