{#- module_calls: a call sits one level below its parent, inside the parent's frame, and launches
    at most the GPU events its parent launches; its first / last GPU event bound its kernels.
    Returns the violating calls. -#}
with calls as (
    select * from {{ ref('module_calls') }}
)

select
    calls.module_call_key,
    calls.depth,
    parent.depth as parent_depth,
    calls.kernel_count,
    parent.kernel_count as parent_kernel_count
from calls
left join calls as parent
    on calls.trace_id = parent.trace_id
    and calls.parent_module_call_id = parent.module_call_id
where (calls.parent_module_call_id is null and calls.depth <> 0)
    or (calls.parent_module_call_id is not null and (
        parent.module_call_id is null
        or calls.depth <> parent.depth + 1
        or calls.ts_us < parent.ts_us
        or calls.end_us > parent.end_us
        or calls.kernel_count > parent.kernel_count
        or calls.kernel_time_us > parent.kernel_time_us + 1e-6
    ))
    or (calls.kernel_count > 0 and (
        calls.first_kernel_ts_us > calls.last_kernel_ts_us
        or calls.last_kernel_end_us < calls.last_kernel_ts_us
    ))
    or (calls.kernel_count = 0 and calls.first_kernel_event_idx is not null)
    or len(calls.module_chain) <> calls.depth + 1
