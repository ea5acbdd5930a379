{#- gpu_idle_gaps: per trace the gap durations add up to gpu_timeline's idle time (ms, within
    1e-6 ms; a trace without gaps has 0 idle time), and the gaps tile the timeline's span: none
    overlaps the next, and gap_id runs 1..n by start. Returns the traces that break it. -#}
with gaps as (
    select * from {{ ref('gpu_idle_gaps') }}
),

timeline as (
    select * from {{ ref('gpu_timeline') }}
),

gap_sums as (
    select
        trace_id,
        sum(duration_us) / 1000 as gap_time_ms,
        count(*) as gap_count,
        max(gap_id) as last_gap_id,
        min(gap_id) as first_gap_id,
        count(*) filter (where ordered_next_start_us < end_us or duration_us <= 0) as misordered_gaps
    from (
        select *, lead(start_us) over (partition by trace_id order by gap_id) as ordered_next_start_us
        from gaps
    ) as ordered_gaps
    group by trace_id
),

compared as (
    select
        timeline.trace_id,
        coalesce(gap_sums.gap_time_ms, 0) - timeline.idle_time_ms as idle_diff_ms,
        gap_sums.gap_count,
        gap_sums.first_gap_id,
        gap_sums.last_gap_id,
        gap_sums.misordered_gaps
    from timeline
    left join gap_sums on timeline.trace_id = gap_sums.trace_id
)

select *
from compared
where abs(idle_diff_ms) > 1e-6
    or (gap_count is not null and (first_gap_id <> 1 or last_gap_id <> gap_count or misordered_gaps > 0))
