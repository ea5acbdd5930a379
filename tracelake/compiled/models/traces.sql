

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
),

model_updates as (
    select * from "warehouse"."main"."trace_model_updates"
),

kernels as (
    select * from "warehouse"."main"."kernels"
),

host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
),

trace_platforms as (
    select * from "warehouse"."intermediate"."int_trace_platforms"
),

trace_quality as (
    select * from "warehouse"."main"."trace_quality"
),

gpu_counts as (
    select
        trace_id,
        count(*) as gpu_event_count,
        count(*) filter (where is_linked) as linked_gpu_event_count,
        count(*) filter (where category = 'kernel') as kernel_count,
        count(*) filter (where category = 'gpu_memcpy') as memcpy_count,
        count(*) filter (where category = 'gpu_memset') as memset_count
    from kernels
    group by trace_id
),

host_counts as (
    select
        trace_id,
        count(*) filter (where category = 'cpu_op') as cpu_op_count,
        count(*) filter (where category in ('cuda_runtime', 'cuda_driver')) as runtime_call_count,
        count(*) filter (where category = 'python_function') as module_frame_count
    from host_ops
    group by trace_id
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
        trace_files.device_count,
        trace_files.runtime,
        trace_files.runtime_versions,
        trace_files.distributed_backend,
        trace_files.world_size,
        trace_files.rank,
        trace_files.distributed_info,
        trace_files.event_count,
        trace_files.dropped_event_count,
        coalesce(host_counts.cpu_op_count, 0) as cpu_op_count,
        coalesce(host_counts.runtime_call_count, 0) as runtime_call_count,
        coalesce(host_counts.module_frame_count, 0) as module_frame_count,
        coalesce(gpu_counts.gpu_event_count, 0) as gpu_event_count,
        coalesce(gpu_counts.linked_gpu_event_count, 0) as linked_gpu_event_count,
        coalesce(gpu_counts.kernel_count, 0) as kernel_count,
        coalesce(gpu_counts.memcpy_count, 0) as memcpy_count,
        coalesce(gpu_counts.memset_count, 0) as memset_count,
        coalesce(quality_summary.quality_verdict, 'pass') as quality_verdict,
        coalesce(quality_summary.quality_flags, []) as quality_flags,
        trace_files.ingest_seconds,
        trace_files.tracelake_version,
        trace_files.ts_base_us,
        model_updates.models_updated_at
    from trace_files
    -- a trace whose model update was interrupted is not listed until it is finished
    inner join model_updates on trace_files.trace_id = model_updates.trace_id
    left join gpu_counts on trace_files.trace_id = gpu_counts.trace_id
    left join host_counts on trace_files.trace_id = host_counts.trace_id
    left join quality_summary on trace_files.trace_id = quality_summary.trace_id
    left join trace_platforms on trace_files.trace_id = trace_platforms.trace_id
)

select * from final
