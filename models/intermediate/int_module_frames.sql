{#- One row per nn.Module call: the `nn.Module: <Class>_<n>` python frames torch.profiler writes with
    `with_modules=True`, the name split into class, instance and instance number. The only place
    that reads those frame names. torch.profiler writes a thread's frames nested; a frame that
    partly overlaps another on its thread (a damaged trace) is no call of the tree and is left out,
    with the one it overlaps. Only frames of the host call tree count: a frame nested deeper than
    ingest's limit (ingest/limits.py, counted in trace_quality) is no call, so the call ancestry
    stays bounded by that limit. -#}

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
        {{ regex_extract('module_instance', "'^(.+?)(_[0-9]+)?$'", 1) }} as module_class,
        module_instance,
        cast(nullif({{ regex_extract('module_instance', "'_([0-9]+)$'", 1) }}, '') as integer) as instance_index,
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
