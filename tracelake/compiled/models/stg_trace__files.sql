with source as (
    select * from "warehouse"."raw"."trace_files"
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
        -- graph-capture links that `--capture-folder` (or a folder ingest of `capture_traces/`) records
        -- as tags: the replay trace lists its capture traces, each capture its batch size and mode
        -- (execution_details.json)
        string_split(nullif(tags['graph_capture_traces'], ''), ',') as graph_capture_trace_ids,
        try_cast(tags['graph_capture_batch_size'] as integer) as graph_capture_batch_size,
        nullif(tags['graph_capture_mode'], '') as graph_capture_mode,
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
        tracelake_version,
        -- the integer µs every ts of the trace is stored less (ingest/exact_time.py); null in partitions
        -- written before the column existed: those kept ts as read
        coalesce(ts_base_us, 0) as ts_base_us
    from source
)

select * from renamed
