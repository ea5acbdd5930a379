with source as (
    select * from "warehouse"."raw"."host_ops"
),

renamed as (
    select
        trace_id,
        event_idx,
        cat as category,
        -- SGLang's profiler wrappers carry a per-call-site suffix; the op is the same at every
        -- site, and TraceLens' pseudo-op registry drops the suffix too (reference §3.5)
        case
        when name like 'sglang_profiler::%' then regexp_replace(name, '_[0-9]+$', '')
        else name
    end as name,
        ts as ts_us,
        dur as dur_us,
        ts + dur as end_us,
        pid,
        tid,
        correlation,
        external_id,
        try(json(input_dims)::varchar) as input_dims,
        try(json(input_type)::varchar) as input_type,
        try(json(input_strides)::varchar) as input_strides,
        try(json(concrete_inputs)::varchar) as concrete_inputs,
        sequence_number,
        fwd_thread_id,
        record_function_id,
        in_tree,
        parent_idx,
        depth,
        cpu_parent_idx,
        cpu_depth,
        is_cpu_root,
        launcher_op_idx,
        is_backward,
        module_chain
    from source
)

select * from renamed
