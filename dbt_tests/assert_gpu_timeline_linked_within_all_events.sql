{#- Linked GPU events are a subset of all GPU events, so per trace gpu_timeline's total and busy
    time (ms) cannot exceed gpu_timeline_all_events' (1e-6 ms float tolerance), and every trace in
    gpu_timeline has a gpu_timeline_all_events row. Returns the traces that break this. -#}
with linked as (
    select * from {{ ref('gpu_timeline') }}
),

all_events as (
    select * from {{ ref('gpu_timeline_all_events') }}
),

compared as (
    select
        linked.trace_id,
        linked.total_time_ms as linked_total_time_ms,
        all_events.total_time_ms as all_events_total_time_ms,
        linked.busy_time_ms as linked_busy_time_ms,
        all_events.busy_time_ms as all_events_busy_time_ms
    from linked
    left join all_events on linked.trace_id = all_events.trace_id
)

select *
from compared
where all_events_total_time_ms is null
    or linked_total_time_ms > all_events_total_time_ms + 1e-6
    or linked_busy_time_ms > all_events_busy_time_ms + 1e-6
