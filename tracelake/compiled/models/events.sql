

with events as (
    select * from "warehouse"."staging"."stg_trace__events"
),

final as (
    select
        trace_id || ':' || event_idx as event_key,
        trace_id,
        event_idx,
        phase,
        category,
        name,
        ts_us,
        dur_us,
        end_us,
        pid,
        tid,
        flow_id,
        correlation,
        external_id,
        args
    from events
)

select * from final
