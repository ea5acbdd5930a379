

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

final as (
    select
        trace_id,
        ingested_at as parquet_committed_at,
        current_timestamp as models_updated_at,
        tracelake_version as ingested_by_version
    from trace_files
)

select * from final
