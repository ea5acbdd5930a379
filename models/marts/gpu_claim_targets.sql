{#- Everything a finding can claim, one row per trace, kind and item, with where it lies on the
    trace's timeline: each GPU event (`gpu_event`, kernels.event_idx) and each idle gap (`idle_gap`,
    gpu_idle_gaps.gap_id). A finding's window is the span of the items it claims
    (analyzers/finding_windows.py). A view. -#}
{{ config(materialized='view') }}

with kernels as (
    select trace_id, event_idx, ts_us, end_us from {{ ref('kernels') }}
),

gaps as (
    select trace_id, gap_id, start_us, end_us from {{ ref('gpu_idle_gaps') }}
),

final as (
    select trace_id, 'gpu_event' as kind, event_idx as item_id, ts_us as start_us, end_us
    from kernels
    union all
    select trace_id, 'idle_gap' as kind, gap_id as item_id, start_us, end_us
    from gaps
)

select * from final
