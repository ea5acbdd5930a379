with host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
    where category = 'python_function' and name like 'nn.Module: %' and in_tree
),

instances as (
    select
        trace_id,
        event_idx as module_call_id,
        substr(name, length('nn.Module: ') + 1) as module_instance,
        pid,
        tid,
        ts_us,
        dur_us,
        end_us
    from host_ops
),

partly_overlapping as (
    select distinct earlier.trace_id, unnest([earlier.module_call_id, later.module_call_id]) as module_call_id
    from instances as earlier
    inner join instances as later
        on earlier.trace_id = later.trace_id
        and earlier.pid = later.pid
        and earlier.tid = later.tid
        and later.ts_us > earlier.ts_us
        and later.ts_us < earlier.end_us
        and later.end_us > earlier.end_us
),

final as (
    select
        trace_id,
        module_call_id,
        regexp_extract(module_instance, '^(.+?)(_[0-9]+)?$', 1) as module_class,
        module_instance,
        cast(nullif(regexp_extract(module_instance, '_([0-9]+)$', 1), '') as integer) as instance_index,
        pid,
        tid,
        ts_us,
        dur_us,
        end_us
    from instances
    where not exists (
        select 1 from partly_overlapping
        where partly_overlapping.trace_id = instances.trace_id
            and partly_overlapping.module_call_id = instances.module_call_id
    )
)

select * from final
