{#- One row per ingested trace: the top-level keys of its file other than `traceEvents`
    (deviceProperties, distributedInfo, baseTimeNanoseconds, runtime versions, traceName,
    schemaVersion, ...) as ingest kept them (secrets masked), for `tracelake export` to write back.
    Partitions ingested before trace_metadata held deviceProperties and distributedInfo get them
    from their own columns. A view. -#}
{{ config(materialized='view') }}

with trace_files as (
    select * from {{ ref('stg_trace__files') }}
),

with_devices as (
    select
        trace_id,
        ts_base_us,
        case
            when json_exists(trace_metadata, '$.deviceProperties') or device_count = 0 then trace_metadata::json
            else json_merge_patch(json_object('deviceProperties', device_properties::json), trace_metadata::json)
        end as header_json,
        distributed_info
    from trace_files
),

final as (
    select
        trace_id,
        case
            when json_exists(header_json, '$.distributedInfo') or distributed_info is null then header_json
            else json_merge_patch(json_object('distributedInfo', distributed_info::json), header_json)
        end as header_json,
        ts_base_us
    from with_devices
)

select * from final
