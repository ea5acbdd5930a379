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
        on outer_call.sweep_start_ns <= inner_call.sweep_start_ns
        and outer_call.sweep_end_ns >= inner_call.sweep_end_ns
        and (
            outer_call.sweep_start_ns < inner_call.sweep_start_ns
            or outer_call.sweep_end_ns > inner_call.sweep_end_ns
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
