{#- A gpu_timeline-shaped model: computation + exposed_comm + exposed_memcpy + idle = total, and
    busy = computation + exposed_comm + exposed_memcpy (ms, within 1e-6 ms).
    Returns the traces that break either identity. -#}
{% test gpu_timeline_adds_up(model) %}

with timeline as (
    select * from {{ model }}
),

checked as (
    select
        trace_id,
        computation_time_ms + exposed_comm_time_ms + exposed_memcpy_time_ms + idle_time_ms
            - total_time_ms as total_diff_ms,
        computation_time_ms + exposed_comm_time_ms + exposed_memcpy_time_ms
            - busy_time_ms as busy_diff_ms
    from timeline
)

select *
from checked
where abs(total_diff_ms) > 1e-6
    or abs(busy_diff_ms) > 1e-6
    or total_diff_ms is null
    or busy_diff_ms is null

{% endtest %}
