{#- One row per nn.Module call: the `nn.Module: <Class>_<n>` python frames torch.profiler writes with
    `with_modules=True`, the name split into class, instance and instance number. The only place
    that reads those frame names. -#}

with host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
    where category = 'python_function' and name like 'nn.Module: %'
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
)

select * from final
