with host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
),

events as (
    select trace_id, event_idx, args from "warehouse"."staging"."stg_trace__events"
    where category in ('cuda_runtime', 'cuda_driver')
),

capture_calls as (
    select
        trace_id,
        pid,
        tid,
        event_idx,
        ts_us,
        end_us,
        name like '%StreamBeginCapture%' as is_begin
    from host_ops
    where category in ('cuda_runtime', 'cuda_driver')
        and (name like '%StreamBeginCapture%' or name like '%StreamEndCapture%')
),

capture_roots as (
    select
        trace_id,
        pid,
        tid,
        row_number() over (partition by trace_id order by ts_us, event_idx) as root_ordinal,
        end_us as start_us,
        next_end_start_us as end_us
    from (
        select
            *,
            min(case when not is_begin then ts_us end) over (
                partition by trace_id, pid, tid order by ts_us, event_idx
                rows between 1 following and unbounded following
            ) as next_end_start_us
        from capture_calls
    )
    where is_begin and next_end_start_us is not null
),

dispatch_calls as (
    select
        host_ops.trace_id,
        host_ops.event_idx,
        host_ops.name,
        host_ops.ts_us,
        host_ops.pid,
        host_ops.tid,
        host_ops.launcher_op_idx,
        host_ops.cpu_parent_idx,
        case
            when host_ops.name ilike '%memcpy%' then 'memcpy'
            when host_ops.name ilike '%memset%' then 'memset'
            else json_extract_string(events.args, '$.kernel')
        end as match_key
    from host_ops
    left join events
        on host_ops.trace_id = events.trace_id
        and host_ops.event_idx = events.event_idx
    where host_ops.category in ('cuda_runtime', 'cuda_driver')
        and (host_ops.name ilike '%launch%' or host_ops.name ilike '%memcpy%' or host_ops.name ilike '%memset%')
        and host_ops.name not in ('cudaGraphLaunch','hipGraphLaunch')
),

final as (
    select
        capture_roots.trace_id as capture_trace_id,
        capture_roots.root_ordinal,
        capture_roots.start_us as root_start_us,
        capture_roots.end_us as root_end_us,
        capture_roots.pid as root_pid,
        capture_roots.tid as root_tid,
        count(*) over (partition by capture_roots.trace_id, capture_roots.root_ordinal) as root_dispatch_count,
        row_number() over (
            partition by capture_roots.trace_id, capture_roots.root_ordinal
            order by dispatch_calls.ts_us, dispatch_calls.event_idx
        ) as dispatch_ordinal,
        row_number() over (
            partition by capture_roots.trace_id, capture_roots.root_ordinal, dispatch_calls.match_key
            order by dispatch_calls.ts_us, dispatch_calls.event_idx
        ) as key_occurrence,
        dispatch_calls.event_idx as dispatch_event_idx,
        dispatch_calls.name as dispatch_name,
        dispatch_calls.match_key,
        dispatch_calls.launcher_op_idx,
        dispatch_calls.cpu_parent_idx
    from capture_roots
    inner join dispatch_calls
        on capture_roots.trace_id = dispatch_calls.trace_id
        and capture_roots.pid = dispatch_calls.pid
        and capture_roots.tid = dispatch_calls.tid
        and dispatch_calls.ts_us >= capture_roots.start_us
        and dispatch_calls.ts_us < capture_roots.end_us
    where dispatch_calls.match_key is not null
)

select * from final
