with source as (
    select * from "warehouse"."raw"."ingest_checks"
),

renamed as (
    select
        trace_id,
        check_name,
        value,
        threshold,
        verdict,
        detail
    from source
)

select * from renamed
