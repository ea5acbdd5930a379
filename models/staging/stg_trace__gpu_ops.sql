with source as (
    select * from {{ source('trace', 'gpu_ops') }}
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
        {{ gpu_bucket('cat', 'name') }} as gpu_bucket
    from source
)

select * from renamed
