{#- One row per nn.Module call: the `nn.Module: <Class>_<n>` python frames torch.profiler writes with
    `with_modules=True`, the name split into class, instance and instance number. The only place
    that reads those frame names. torch.profiler writes a thread's frames nested; a frame that
    partly overlaps another on its thread (a damaged trace) is no call of the tree and is left out,
    with the one it overlaps. Only frames of the host call tree count: a frame nested deeper than
    ingest's limit (ingest/limits.py, counted in trace_quality) is no call, so the call ancestry
    stays bounded by that limit. The interval joins (here, and the call ancestry) run on `sweep_*_ns`:
    each thread's frames on a time axis of their own, the threads laid end to end, so that a join on
    time alone stays within a thread and DuckDB runs it as one range join (IEJoin) over the sorted
    frames: with the thread as an equality key it hashed on it and compared every pair of a thread's
    frames, 33 k frames of a 1 GB trace took 15 s, against 0.05 s. -#}

with host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
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
        {{ regex_extract('module_instance', "'^(.+?)(_[0-9]+)?$'", 1) }} as module_class,
        module_instance,
        cast(nullif({{ regex_extract('module_instance', "'_([0-9]+)$'", 1) }}, '') as integer) as instance_index,
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
