with source as (
    select * from "warehouse"."raw"."gpu_ops"
),

renamed as (
    select
        trace_id,
        event_idx,
        cat as category,
        name,
        ts as ts_us,
        dur as dur_us,
        ts + dur as end_us,
        pid,
        tid,
        device,
        stream,
        correlation,
        external_id,
        bytes,
        kind,
        grid,
        block,
        case
        when cat = 'gpu_memcpy' then 'memcpy'
        when cat = 'kernel'
            and regexp_matches(name, '^(MEMORY_COPY_(HOST_TO_DEVICE|DEVICE_TO_HOST|DEVICE_TO_DEVICE)|__amd_rocclr_copyBuffer(Rect)?(Aligned)?(\.kd)?)$')
            then 'memcpy'
        when cat = 'kernel'
            and regexp_matches(name, '^__amd_rocclr_fillBuffer(Aligned)?(\.kd)?$')
            then 'computation'
        when regexp_matches(lower(name), 'nccl|rccl|cross_device_reduce')
            then 'communication'
        else 'computation'
    end as gpu_bucket
    from source
)

select * from renamed
