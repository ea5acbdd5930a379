{#- gpu_event_exposure: per trace and bucket, the events' exclusive time adds up to the bucket's
    union and the exposed time to gpu_timeline's exposed time (ms, within 1e-6 ms). Returns the
    traces that break it. -#}
{% test gpu_event_exposure_adds_up_to_timeline(model) %}

with exposure as (
    select * from {{ model }}
),

timeline as (
    select * from {{ ref('gpu_timeline') }}
),

sums as (
    select
        trace_id,
        coalesce(sum(exclusive_us) filter (where gpu_bucket = 'computation'), 0) / 1000 as computation_ms,
        coalesce(sum(exclusive_us) filter (where gpu_bucket = 'communication'), 0) / 1000 as total_comm_ms,
        coalesce(sum(exposed_us) filter (where gpu_bucket = 'communication'), 0) / 1000 as exposed_comm_ms,
        coalesce(sum(exclusive_us) filter (where gpu_bucket = 'memcpy'), 0) / 1000 as total_memcpy_ms,
        coalesce(sum(exposed_us) filter (where gpu_bucket = 'memcpy'), 0) / 1000 as exposed_memcpy_ms
    from exposure
    group by trace_id
),

compared as (
    select
        timeline.trace_id,
        sums.computation_ms - timeline.computation_time_ms as computation_diff_ms,
        sums.total_comm_ms - timeline.total_comm_time_ms as total_comm_diff_ms,
        sums.exposed_comm_ms - timeline.exposed_comm_time_ms as exposed_comm_diff_ms,
        sums.total_memcpy_ms - timeline.total_memcpy_time_ms as total_memcpy_diff_ms,
        sums.exposed_memcpy_ms - timeline.exposed_memcpy_time_ms as exposed_memcpy_diff_ms
    from timeline
    left join sums on timeline.trace_id = sums.trace_id
)

select *
from compared
where computation_diff_ms is null
    or abs(computation_diff_ms) > 1e-6
    or abs(total_comm_diff_ms) > 1e-6
    or abs(exposed_comm_diff_ms) > 1e-6
    or abs(total_memcpy_diff_ms) > 1e-6
    or abs(exposed_memcpy_diff_ms) > 1e-6

{% endtest %}
