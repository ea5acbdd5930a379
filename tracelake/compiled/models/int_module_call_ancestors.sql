with module_frames as (
    select * from "warehouse"."intermediate"."int_module_frames"
),

enclosing_frames as (
    select
        inner_call.trace_id,
        inner_call.module_call_id,
        outer_call.module_call_id as ancestor_call_id,
        outer_call.ts_us as ancestor_ts_us,
        outer_call.end_us as ancestor_end_us
    from module_frames as inner_call
    inner join module_frames as outer_call
        on inner_call.trace_id = outer_call.trace_id
        and inner_call.pid = outer_call.pid
        and inner_call.tid = outer_call.tid
        and outer_call.ts_us <= inner_call.ts_us
        and outer_call.end_us >= inner_call.end_us
        and (
            outer_call.ts_us < inner_call.ts_us
            or outer_call.end_us > inner_call.end_us
            or outer_call.module_call_id <= inner_call.module_call_id
        )
),

ranked as (
    select
        trace_id,
        module_call_id,
        ancestor_call_id,
        row_number() over (
            partition by trace_id, module_call_id
            order by ancestor_ts_us desc, ancestor_end_us asc, ancestor_call_id desc
        ) - 1 as distance
    from enclosing_frames
)

select * from ranked
