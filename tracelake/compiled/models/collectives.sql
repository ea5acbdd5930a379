

with comm_kernels as (
    select trace_id, event_idx, name, ts_us, dur_us, external_id
    from "warehouse"."main"."kernels"
    where is_comm and is_linked
),

comm_records as (
    select
        trace_id,
        external_id,
        lower(json_extract_string(args, '$."Collective name"')) as collective_name,
        lower(json_extract_string(args, '$.dtype')) as dtype,
        try_cast(json_extract(args, '$."In msg nelems"') as bigint) as in_elements,
        try_cast(json_extract(args, '$."Out msg nelems"') as bigint) as out_elements,
        try_cast(json_extract(args, '$."Group size"') as bigint) as group_size
    from "warehouse"."staging"."stg_trace__events"
    where category = 'cpu_op' and name = 'record_param_comms' and external_id is not null
),

dtypes as (
    -- one row per dtype name without its `c10::` namespace (the seed lists both spellings)
    select replace(dtype_name, 'c10::', '') as dtype_key, max(bytes_per_element) as bytes_per_element
    from "warehouse"."main"."dtypes"
    group by 1
),

exposure as (
    select trace_id, event_idx, exposed_us from "warehouse"."main"."gpu_event_exposure"
),

sized as (
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        comm_kernels.name,
        comm_kernels.ts_us,
        comm_kernels.dur_us,
        comm_records.collective_name,
        comm_records.dtype,
        comm_records.group_size,
        greatest(comm_records.in_elements, comm_records.out_elements) * dtypes.bytes_per_element as bytes,
        case
            when comm_records.collective_name like '%allreduce%' or comm_records.collective_name like '%all_reduce%'
                then 2.0 * (comm_records.group_size - 1) / comm_records.group_size
            when regexp_matches(comm_records.collective_name, 'allgather|all_gather|reduce_scatter|reducescatter|all_to_all|alltoall')
                then (comm_records.group_size - 1) * 1.0 / comm_records.group_size
            else 1.0
        end as bus_factor
    from comm_kernels
    inner join comm_records
        on comm_kernels.trace_id = comm_records.trace_id
        and comm_kernels.external_id = comm_records.external_id
    left join dtypes on replace(comm_records.dtype, 'c10::', '') = dtypes.dtype_key
    where comm_records.group_size > 1
),

final as (
    select
        sized.trace_id,
        sized.event_idx,
        sized.name,
        sized.collective_name,
        sized.dtype,
        sized.group_size,
        sized.bytes,
        sized.ts_us,
        sized.dur_us,
        sized.bytes / nullif(sized.dur_us, 0) / 1000.0 as alg_gb_per_s,
        sized.bytes * sized.bus_factor / nullif(sized.dur_us, 0) / 1000.0 as bus_gb_per_s,
        sized.bus_factor,
        coalesce(exposure.exposed_us, 0) as exposed_us
    from sized
    left join exposure
        on sized.trace_id = exposure.trace_id
        and sized.event_idx = exposure.event_idx
)

select * from final
