with source as (
    select * from "warehouse"."raw"."events"
),

renamed as (
    select
        trace_id,
        event_idx,
        ph as phase,
        cat as category,
        name,
        ts as ts_us,
        dur as dur_us,
        ts + coalesce(dur, 0) as end_us,
        pid,
        tid,
        flow_id,
        correlation,
        external_id,
        args,
        has_args
    from source
)

select * from renamed
