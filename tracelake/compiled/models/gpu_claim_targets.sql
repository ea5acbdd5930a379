

with kernels as (
    select trace_id, event_idx, ts_us, end_us from "warehouse"."main"."kernels"
),

gaps as (
    select trace_id, gap_id, start_us, end_us from "warehouse"."main"."gpu_idle_gaps"
),

final as (
    select trace_id, 'gpu_event' as kind, event_idx as item_id, ts_us as start_us, end_us
    from kernels
    union all
    select trace_id, 'idle_gap' as kind, gap_id as item_id, start_us, end_us
    from gaps
)

select * from final
