with source as (
    select * from {{ source('trace', 'host_ops') }}
),

renamed as (
    select
        trace_id,
        event_idx,
        cat as category,
        -- SGLang's profiler wrappers carry a per-call-site suffix; the op is the same at every
        -- site, and TraceLens' pseudo-op registry drops the suffix too (reference §3.5)
        {{ op_registry_name('name') }} as name,
        ts as ts_us,
        dur as dur_us,
        ts + dur as end_us,
        pid,
        tid,
        correlation,
        external_id,
        {{ json_compact('input_dims') }} as input_dims,
        {{ json_compact('input_type') }} as input_type,
        {{ json_compact('input_strides') }} as input_strides,
        {{ json_compact('concrete_inputs') }} as concrete_inputs,
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
