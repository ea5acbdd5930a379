

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
),

model_updates as (
    select * from "warehouse"."main"."trace_model_updates"
),

event_counts as (
    select * from "warehouse"."intermediate"."int_trace_event_counts"
),

trace_platforms as (
    select * from "warehouse"."intermediate"."int_trace_platforms"
),

trace_quality as (
    select * from "warehouse"."main"."trace_quality"
),

quality_summary as (
    select
        trace_id,
        case
            when bool_or(verdict = 'fail') then 'fail'
            when bool_or(verdict = 'warn') then 'warn'
            else 'pass'
        end as quality_verdict,
        list(check_name order by check_name) filter (where verdict in ('warn', 'fail')) as quality_flags
    from trace_quality
    group by trace_id
),

final as (
    select
        trace_files.trace_id,
        trace_files.file_name,
        trace_files.source_path,
        trace_files.file_size_bytes,
        trace_files.uncompressed_bytes,
        trace_files.sha256,
        trace_files.ingested_at,
        trace_files.tags,
        trace_files.tags['mode'] as mode,
        trace_files.device_name,
        trace_platforms.platform,
        trace_platforms.is_detected as platform_detected,
        -- whose word the roofline platform is: the trace's own device, or the default assumed for it
        case when trace_platforms.is_detected then 'trace device' else 'assumed' end as platform_source,
        trace_platforms.assumed_for_runtime as platform_assumed_for,
        trace_files.device_count,
        trace_files.runtime,
        trace_files.runtime_versions,
        trace_files.distributed_backend,
        trace_files.world_size,
        trace_files.rank,
        trace_files.distributed_info,
        trace_files.event_count,
        trace_files.dropped_event_count,
        coalesce(event_counts.cpu_op_count, 0) as cpu_op_count,
        coalesce(event_counts.runtime_call_count, 0) as runtime_call_count,
        coalesce(event_counts.module_frame_count, 0) as module_frame_count,
        coalesce(event_counts.gpu_event_count, 0) as gpu_event_count,
        coalesce(event_counts.linked_gpu_event_count, 0) as linked_gpu_event_count,
        coalesce(event_counts.kernel_count, 0) as kernel_count,
        coalesce(event_counts.memcpy_count, 0) as memcpy_count,
        coalesce(event_counts.memset_count, 0) as memset_count,
        coalesce(quality_summary.quality_verdict, 'pass') as quality_verdict,
        coalesce(quality_summary.quality_flags, []) as quality_flags,
        trace_files.ingest_seconds,
        trace_files.tracelake_version,
        trace_files.ts_base_us,
        model_updates.models_updated_at
    from trace_files
    -- a trace whose model update was interrupted is not listed until it is finished
    inner join model_updates on trace_files.trace_id = model_updates.trace_id
    left join event_counts on trace_files.trace_id = event_counts.trace_id
    left join quality_summary on trace_files.trace_id = quality_summary.trace_id
    left join trace_platforms on trace_files.trace_id = trace_platforms.trace_id
)

select * from final
