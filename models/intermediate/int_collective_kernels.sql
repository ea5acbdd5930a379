{#- One row per communication kernel of a trace (kernels.is_comm) with what the trace says about
    its collective, from the best source it has: the kernel's own args (Kineto copies c10d's
    fields onto the kernel, 2024+), else the `record_param_comms` host op that launched it, else
    the `nccl:*` user annotation around its launch (2023 traces: name, `Input Dims`, `Input type`),
    else the kernel name. Each field is taken from the first source that has it. -#}
{{ config(materialized='incremental') }}

with comm_kernels as (
    select trace_id, event_idx, name, stream, ts_us, dur_us, end_us, cpu_op_id, cpu_op_name,
        enclosing_cpu_op_id, launch_event_idx
    from {{ ref('kernels') }}
    where is_comm and category = 'kernel' and {{ is_new_trace() }}
),

events as (
    select trace_id, event_idx, category, name, ts_us, end_us, pid, tid, args
    from {{ ref('stg_trace__events') }}
    where {{ is_new_trace() }}
),

kernel_args as (
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        {{ collective_arg_columns('events.args') }}
    from comm_kernels
    inner join events
        on comm_kernels.trace_id = events.trace_id
        and comm_kernels.event_idx = events.event_idx
),

comm_records as (
    -- the c10d host op that launched the kernel (its launcher, else the op around the launch)
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        events.ts_us as record_ts_us,
        events.end_us as record_end_us,
        {{ collective_arg_columns('events.args') }}
    from comm_kernels
    inner join events
        on comm_kernels.trace_id = events.trace_id
        and events.event_idx = case
            when comm_kernels.cpu_op_name = 'record_param_comms' then comm_kernels.cpu_op_id
            else comm_kernels.enclosing_cpu_op_id
        end
    where events.name = 'record_param_comms'
),

launch_calls as (
    select comm_kernels.trace_id, comm_kernels.event_idx, events.ts_us, events.pid, events.tid
    from comm_kernels
    inner join events
        on comm_kernels.trace_id = events.trace_id
        and comm_kernels.launch_event_idx = events.event_idx
),

nccl_annotations as (
    select
        trace_id, event_idx, ts_us, end_us, pid, tid,
        lower(substr(name, 6)) as collective_name_raw,
        {{ json_shapes(json_field_text('args', 'Input Dims')) }} as input_dims,
        {{ json_strings(json_field_text('args', 'Input type')) }} as input_types
    from events
    where category = 'user_annotation' and name like 'nccl:%'
),

kernel_annotations as (
    -- the innermost nccl:* annotation on the launching thread that encloses the launch call
    select
        launch_calls.trace_id,
        launch_calls.event_idx,
        arg_max(nccl_annotations.collective_name_raw, nccl_annotations.ts_us) as collective_name_raw,
        arg_max(nccl_annotations.input_dims[1], nccl_annotations.ts_us) as first_input_dims,
        arg_max(nccl_annotations.input_types[1], nccl_annotations.ts_us) as first_input_type
    from launch_calls
    inner join nccl_annotations
        on launch_calls.trace_id = nccl_annotations.trace_id
        and launch_calls.pid = nccl_annotations.pid
        and launch_calls.tid = nccl_annotations.tid
        and launch_calls.ts_us between nccl_annotations.ts_us and nccl_annotations.end_us
    group by launch_calls.trace_id, launch_calls.event_idx
),

name_spellings as (
    select * from {{ ref('collective_names') }} where match_on = 'name'
),

kernel_patterns as (
    select * from {{ ref('collective_names') }} where match_on = 'kernel_regex'
),

kernel_name_collectives as (
    select
        comm_kernels.name,
        arg_min(kernel_patterns.collective_name, kernel_patterns.rule_order) as collective_name
    from (select distinct name from comm_kernels) as comm_kernels
    inner join kernel_patterns on {{ regex_search('lower(comm_kernels.name)', 'kernel_patterns.spelling') }}
    group by comm_kernels.name
),

dtypes as (
    -- one row per dtype name without its `c10::` namespace (the seed lists both spellings)
    select replace(dtype_name, 'c10::', '') as dtype_key, max(bytes_per_element) as bytes_per_element
    from {{ ref('dtypes') }}
    group by 1
),

merged as (
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        comm_kernels.stream,
        comm_kernels.name as kernel_name,
        comm_kernels.ts_us,
        comm_kernels.dur_us,
        comm_kernels.end_us,
        case
            when kernel_args.collective_name_raw is not null then 'kernel_args'
            when comm_records.collective_name_raw is not null then 'record_param_comms'
            when kernel_annotations.collective_name_raw is not null then 'annotation'
            else 'kernel_name'
        end as metadata_source,
        coalesce(kernel_args.collective_name_raw, comm_records.collective_name_raw,
            kernel_annotations.collective_name_raw) as collective_name_raw,
        coalesce(kernel_args.dtype, comm_records.dtype, kernel_annotations.first_input_type) as dtype,
        coalesce(kernel_args.in_nelems, comm_records.in_nelems,
            case when kernel_annotations.first_input_dims is not null
                then {{ list_prod('kernel_annotations.first_input_dims') }} end) as in_nelems,
        coalesce(kernel_args.out_nelems, comm_records.out_nelems) as out_nelems_given,
        coalesce(kernel_args.group_size, comm_records.group_size) as group_size,
        coalesce(kernel_args.pg_name, comm_records.pg_name) as pg_name,
        coalesce(kernel_args.pg_desc, comm_records.pg_desc) as pg_desc,
        coalesce(kernel_args.pg_ranks_text, comm_records.pg_ranks_text) as pg_ranks_text,
        coalesce(kernel_args.in_split_text, comm_records.in_split_text) as in_split_text,
        coalesce(kernel_args.out_split_text, comm_records.out_split_text) as out_split_text,
        coalesce(kernel_args.seq, comm_records.seq) as seq,
        coalesce(kernel_args.comms_id, comm_records.comms_id) as comms_id,
        coalesce(kernel_args.global_rank_start, comm_records.global_rank_start) as global_rank_start,
        coalesce(kernel_args.global_rank_stride, comm_records.global_rank_stride) as global_rank_stride
    from comm_kernels
    left join kernel_args
        on comm_kernels.trace_id = kernel_args.trace_id
        and comm_kernels.event_idx = kernel_args.event_idx
    left join comm_records
        on comm_kernels.trace_id = comm_records.trace_id
        and comm_kernels.event_idx = comm_records.event_idx
    left join kernel_annotations
        on comm_kernels.trace_id = kernel_annotations.trace_id
        and comm_kernels.event_idx = kernel_annotations.event_idx
),

named as (
    select
        merged.*,
        coalesce(name_spellings.collective_name, kernel_name_collectives.collective_name, 'unknown')
            as collective_name,
        case when name_spellings.spelling is not null then name_spellings.collective_kind
             else coalesce(kernel_spellings.collective_kind, 'other') end as collective_kind,
        case when name_spellings.spelling is not null then name_spellings.bus_factor_slope
             else kernel_spellings.bus_factor_slope end as bus_factor_slope,
        case when name_spellings.spelling is not null then name_spellings.bus_factor_constant
             else kernel_spellings.bus_factor_constant end as bus_factor_constant,
        {{ int_list_text('merged.pg_ranks_text') }} as pg_ranks_listed,
        merged.pg_ranks_text like '%...%' as pg_ranks_truncated,
        {{ int_list_text('merged.in_split_text') }} as in_split_sizes,
        {{ int_list_text('merged.out_split_text') }} as out_split_sizes,
        dtypes.bytes_per_element as dtype_bytes
    from merged
    left join name_spellings on merged.collective_name_raw = name_spellings.spelling
    left join kernel_name_collectives on merged.kernel_name = kernel_name_collectives.name
    left join (
        -- kind and bus factor of the kernel-name collective: the seed's first row for that name
        select collective_name, arg_min(collective_kind, rule_order) as collective_kind,
            arg_min(bus_factor_slope, rule_order) as bus_factor_slope,
            arg_min(bus_factor_constant, rule_order) as bus_factor_constant
        from kernel_patterns
        group by collective_name
    ) as kernel_spellings on kernel_name_collectives.collective_name = kernel_spellings.collective_name
    left join dtypes on lower(replace(merged.dtype, 'c10::', '')) = dtypes.dtype_key
),

sized as (
    select
        named.*,
        coalesce(out_nelems_given, case
            when metadata_source = 'annotation' and collective_name not in ('allgather', 'reducescatter')
                then in_nelems
        end) as out_nelems
    from named
),

final as (
    select
        trace_id,
        event_idx,
        stream,
        kernel_name,
        ts_us,
        dur_us,
        end_us,
        collective_name_raw,
        collective_name,
        collective_kind,
        collective_kind = 'p2p' as is_p2p,
        dtype,
        dtype_bytes,
        in_nelems,
        -- an annotation gives one tensor: the output has as many elements, except where the
        -- collective changes the size (allgather, reducescatter), where it stays unknown
        out_nelems,
        -- TraceLens' full message: the output for allgather, else the input
        case when collective_name = 'allgather' then out_nelems else in_nelems end * dtype_bytes as msg_bytes,
        group_size,
        pg_name,
        pg_desc,
        case
            when not pg_ranks_truncated then pg_ranks_listed
            when global_rank_start is not null and global_rank_stride is not null and group_size is not null
                then list_transform(range(group_size), lambda i: global_rank_start + i * global_rank_stride)
        end as pg_ranks,
        coalesce(pg_ranks_truncated, false) as pg_ranks_truncated,
        in_split_sizes,
        out_split_sizes,
        coalesce(
            in_split_text like '%...%' or out_split_text like '%...%'
            or (len(in_split_sizes) > 0 and len(in_split_sizes) <> group_size)
            or (len(out_split_sizes) > 0 and len(out_split_sizes) <> group_size),
            false
        ) as splits_truncated,
        seq,
        comms_id,
        global_rank_start,
        global_rank_stride,
        metadata_source,
        bus_factor_slope,
        bus_factor_constant
    from sized
)

select * from final
