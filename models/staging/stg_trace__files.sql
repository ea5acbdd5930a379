with source as (
    select * from {{ source('trace', 'trace_files') }}
),

renamed as (
    select
        trace_id,
        source_path,
        file_name,
        file_size_bytes,
        uncompressed_bytes,
        sha256,
        ingested_at,
        tags,
        device_name,
        device_count,
        device_properties,
        runtime,
        runtime_versions,
        distributed_backend,
        world_size,
        rank,
        distributed_info,
        linking_key,
        event_count,
        dropped_event_count,
        trace_metadata,
        ingest_seconds,
        tracelake_version
    from source
)

select * from renamed
