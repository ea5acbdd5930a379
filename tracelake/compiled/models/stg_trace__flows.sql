with source as (
    select * from "warehouse"."raw"."flows"
),

renamed as (
    select
        trace_id,
        event_idx,
        cat as category,
        ph as phase,
        flow_id,
        ts as ts_us,
        pid,
        tid,
        bp as binding_point,
        coalesce(cat in ('ac2g','async_cpu_to_gpu'), false) as is_launch_flow
    from source
)

select * from renamed
