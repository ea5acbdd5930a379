

with traces as (
    select * from "warehouse"."main"."traces"
),

timelines as (
    select * from "warehouse"."main"."gpu_timeline"
),

kernels as (
    select * from "warehouse"."main"."kernels"
),

linked_kernel_time as (
    select trace_id, sum(dur_us) / 1000.0 as kernel_time_ms
    from kernels
    where is_linked
    group by trace_id
),

final as (
    select
        traces.trace_id,
        traces.file_name,
        coalesce(traces.device_name, 'unknown device') as device_name,
        traces.platform,
        timelines.total_time_ms,
        timelines.busy_time_ms,
        timelines.computation_time_ms,
        timelines.exposed_comm_time_ms,
        timelines.exposed_memcpy_time_ms,
        timelines.idle_time_ms,
        coalesce(linked_kernel_time.kernel_time_ms, 0) as kernel_time_ms,
        timelines.trace_id is not null as has_gpu_work
    from traces
    left join timelines on timelines.trace_id = traces.trace_id
    left join linked_kernel_time on linked_kernel_time.trace_id = traces.trace_id
)

select * from final
