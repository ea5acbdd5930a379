with events as (
    select * from "warehouse"."staging"."stg_trace__events"
),

trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
),

keyed_events as (
    select
        events.trace_id,
        events.event_idx,
        events.category,
        events.name,
        events.pid,
        events.tid,
        events.has_args,
        case trace_files.linking_key
            when 'correlation' then events.correlation
            else events.external_id
        end as link_id
    from events
    inner join trace_files on events.trace_id = trace_files.trace_id
    where events.phase not in ('s', 'f', 't')
)

select * from keyed_events
