

with kernels as (
    select * from "warehouse"."main"."kernels"
),

op_perf_instances as (
    select * from "warehouse"."main"."op_perf_instances"
),

cpu_op_ancestors as (
    select * from "warehouse"."main"."cpu_op_ancestors"
),

module_call_events as (
    select * from "warehouse"."main"."module_call_events"
),

computation_kernels as (
    select trace_id, event_idx, name, ts_us, dur_us, kernel_type, cpu_op_id, launch_event_idx
    from kernels
    where is_linked and category = 'kernel' and gpu_bucket = 'computation'
),

modeled_ops as (
    select trace_id, op_id
    from op_perf_instances
    where not is_synthetic and op_id is not null
),

modeled_ancestors as (
    select
        computation_kernels.trace_id,
        computation_kernels.event_idx,
        cpu_op_ancestors.ancestor_op_id,
        row_number() over (
            partition by computation_kernels.trace_id, computation_kernels.event_idx
            order by cpu_op_ancestors.distance
        ) as nearness
    from computation_kernels
    inner join cpu_op_ancestors
        on computation_kernels.trace_id = cpu_op_ancestors.trace_id
        and computation_kernels.cpu_op_id = cpu_op_ancestors.op_id
    -- a semi join: as a third inner join the optimizer may pair the kernels with the modeled ops on
    -- trace_id alone first (every kernel with every modeled op of its trace: minutes and GBs)
    where exists (
        select 1 from modeled_ops
        where modeled_ops.trace_id = cpu_op_ancestors.trace_id
            and modeled_ops.op_id = cpu_op_ancestors.ancestor_op_id
    )
),

nearest_modeled_ancestors as (
    select trace_id, event_idx, ancestor_op_id
    from modeled_ancestors
    where nearness = 1
),

final as (
    select
        computation_kernels.trace_id,
        computation_kernels.event_idx,
        coalesce(nearest_modeled_ancestors.ancestor_op_id, computation_kernels.cpu_op_id) as unit_op_id,
        computation_kernels.name,
        computation_kernels.ts_us,
        computation_kernels.dur_us,
        computation_kernels.kernel_type,
        module_call_events.module_call_id
    from computation_kernels
    left join nearest_modeled_ancestors
        on computation_kernels.trace_id = nearest_modeled_ancestors.trace_id
        and computation_kernels.event_idx = nearest_modeled_ancestors.event_idx
    left join module_call_events
        on computation_kernels.trace_id = module_call_events.trace_id
        and computation_kernels.launch_event_idx = module_call_events.event_idx
)

select * from final
