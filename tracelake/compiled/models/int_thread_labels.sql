with events as (
    select * from "warehouse"."staging"."stg_trace__events"
    where phase = 'M'
),

process_labels as (
    select
        trace_id,
        pid,
        max(case when name = 'process_name' then json_extract_string(args, '$.name') end) as process_name,
        max(case when name = 'process_labels' then json_extract_string(args, '$.labels') end) as process_label
    from events
    group by trace_id, pid
),

thread_labels as (
    select
        trace_id,
        pid,
        tid,
        max(json_extract_string(args, '$.name')) as thread_name
    from events
    where name = 'thread_name'
    group by trace_id, pid, tid
),

final as (
    select
        thread_labels.trace_id,
        thread_labels.pid,
        thread_labels.tid,
        process_labels.process_name,
        process_labels.process_label,
        thread_labels.thread_name
    from thread_labels
    left join process_labels
        on thread_labels.trace_id = process_labels.trace_id
        and thread_labels.pid = process_labels.pid
)

select * from final
