{#- gpu_idle_gaps: a gap is blamed on a synchronizing call only when that call spans it (issue 13):
    every sync_blocked gap starts inside a call of var synchronizing_runtime_calls that returns at
    or after the gap's end (within idle_gap_sync_span_tolerance_us), and every window_edge gap is
    the first or the last of its trace. Returns the gaps that break it. -#}
with gaps as (
    select * from {{ ref('gpu_idle_gaps') }}
),

last_gaps as (
    select trace_id, max(gap_id) as last_gap_id from gaps group by trace_id
)

select gaps.*
from gaps
inner join last_gaps on gaps.trace_id = last_gaps.trace_id
where (gaps.gap_class = 'sync_blocked'
        and (gaps.start_runtime_name is null
             or gaps.start_runtime_name not in (
                 {%- for name in var('synchronizing_runtime_calls') %}'{{ name }}'{{ ', ' if not loop.last }}{% endfor -%})
             or gaps.start_runtime_end_us < gaps.end_us - {{ var('idle_gap_sync_span_tolerance_us') }}
             or gaps.next_launch_ts_us < gaps.start_runtime_ts_us))
    or (gaps.gap_class = 'window_edge' and gaps.gap_id not in (1, last_gaps.last_gap_id))
