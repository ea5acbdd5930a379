{#- module_calls: the outermost calls of a trace together launch each linked GPU event whose launch
    is inside a module call exactly once (kernel count and time). Returns the traces that differ. -#}
with calls as (
    select * from {{ ref('module_calls') }}
),

call_events as (
    select * from {{ ref('module_call_events') }}
),

kernels as (
    select * from {{ ref('kernels') }}
    where is_linked
),

outermost as (
    select trace_id, sum(kernel_count) as kernel_count, sum(kernel_time_us) as kernel_time_us
    from calls
    where depth = 0
    group by trace_id
),

launched_in_calls as (
    select kernels.trace_id, count(*) as kernel_count, sum(kernels.dur_us) as kernel_time_us
    from kernels
    inner join call_events
        on kernels.trace_id = call_events.trace_id
        and kernels.launch_event_idx = call_events.event_idx
    group by kernels.trace_id
)

select
    outermost.trace_id,
    outermost.kernel_count,
    launched_in_calls.kernel_count as launched_kernel_count
from outermost
full outer join launched_in_calls
    on outermost.trace_id = launched_in_calls.trace_id
where coalesce(outermost.kernel_count, 0) <> coalesce(launched_in_calls.kernel_count, 0)
    or abs(coalesce(outermost.kernel_time_us, 0) - coalesce(launched_in_calls.kernel_time_us, 0)) > 1e-3
