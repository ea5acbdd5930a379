{#- One row per trace whose marts are up to date: the ledger of the model updates. Written by the
    same transaction as every other incremental model's rows for the trace, so a trace is listed
    here exactly when its rows are in every mart; a trace whose Parquet is committed but which is
    missing here was interrupted, and the next command finishes it (tracelake/warehouse.py). -#}
{{ config(materialized='incremental') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
    where {{ is_new_trace() }}
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
