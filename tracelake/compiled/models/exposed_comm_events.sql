

with exposure as (
    select * from "warehouse"."main"."gpu_event_exposure"
),

exposed_comm as (
    select trace_id, event_idx, ts_us, exposed_us
    from exposure
    where gpu_bucket = 'communication' and exposed_us > 0
),

final as (
    select
        trace_id,
        event_idx,
        ts_us,
        exposed_us,
        coalesce(sum(exposed_us) over (
            partition by trace_id
            order by ts_us, event_idx
            rows between unbounded preceding and 1 preceding
        ), 0) as exposed_before_us
    from exposed_comm
)

select * from final
