{#- Per trace: its GPU ops and host events counted once, when the trace is modelled, so `traces`
    (a view every cross-trace question starts from) reads one row per trace instead of every event. -#}
{{ config(materialized='incremental') }}

with kernels as (
    select * from {{ ref('kernels') }}
    where {{ is_new_trace() }}
),

host_ops as (
    select * from {{ ref('stg_trace__host_ops') }}
    where {{ is_new_trace() }}
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

final as (
    select
        coalesce(gpu_counts.trace_id, host_counts.trace_id) as trace_id,
        coalesce(host_counts.cpu_op_count, 0) as cpu_op_count,
        coalesce(host_counts.runtime_call_count, 0) as runtime_call_count,
        coalesce(host_counts.module_frame_count, 0) as module_frame_count,
        coalesce(gpu_counts.gpu_event_count, 0) as gpu_event_count,
        coalesce(gpu_counts.linked_gpu_event_count, 0) as linked_gpu_event_count,
        coalesce(gpu_counts.kernel_count, 0) as kernel_count,
        coalesce(gpu_counts.memcpy_count, 0) as memcpy_count,
        coalesce(gpu_counts.memset_count, 0) as memset_count
    from gpu_counts
    full outer join host_counts on gpu_counts.trace_id = host_counts.trace_id
)

select * from final
