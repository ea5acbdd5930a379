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
        end_us,
        round(ts_us * 1000)::bigint as ts_ns,
        round(end_us * 1000)::bigint as end_ns
    from host_ops
),

thread_axes as (
    -- where each thread's own time axis starts: after every thread before it, one ns apart
    select
        trace_id,
        pid,
        tid,
        min(ts_ns) as first_ns,
        coalesce(sum(max(end_ns) - min(ts_ns) + 1) over (
            order by trace_id, pid, tid rows between unbounded preceding and 1 preceding
        ), 0)::bigint as axis_offset_ns
    from instances
    group by trace_id, pid, tid
),

swept as (
    select
        instances.*,
        thread_axes.axis_offset_ns + instances.ts_ns - thread_axes.first_ns as sweep_start_ns,
        thread_axes.axis_offset_ns + instances.end_ns - thread_axes.first_ns as sweep_end_ns
    from instances
    inner join thread_axes
        on instances.trace_id = thread_axes.trace_id
        and instances.pid = thread_axes.pid
        and instances.tid = thread_axes.tid
),

partly_overlapping as (
    select distinct earlier.trace_id, unnest([earlier.module_call_id, later.module_call_id]) as module_call_id
    from swept as earlier
    inner join swept as later
        on later.sweep_start_ns > earlier.sweep_start_ns
        and later.sweep_start_ns < earlier.sweep_end_ns
        and later.sweep_end_ns > earlier.sweep_end_ns
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
        end_us,
        sweep_start_ns,
        sweep_end_ns
    from swept as instances
    where not exists (
        select 1 from partly_overlapping
        where partly_overlapping.trace_id = instances.trace_id
            and partly_overlapping.module_call_id = instances.module_call_id
    )
)

select * from final
