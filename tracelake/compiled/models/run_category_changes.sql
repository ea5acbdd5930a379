

with run_groups as (
    select * from "warehouse"."main"."run_groups"
),

run_category_time as (
    select * from "warehouse"."intermediate"."int_run_category_time"
),

gpu_runs as (
    select group_key, run_index, min(trace_position) as first_trace_position
    from run_groups
    where has_gpu_timeline
    group by group_key, run_index
),

first_traces as (
    -- a run is named by its first trace
    select gpu_runs.group_key, gpu_runs.run_index, run_groups.*  exclude (group_key, run_index)
    from gpu_runs
    inner join run_groups on run_groups.trace_position = gpu_runs.first_trace_position
),

pairs as (
    select
        group_key,
        lag(run_index) over (partition by group_key order by run_index) as before_run,
        run_index as after_run
    from gpu_runs
),

pair_categories as (
    select distinct pairs.group_key, pairs.before_run, pairs.after_run, run_category_time.op_category
    from pairs
    inner join run_category_time
        on run_category_time.group_key = pairs.group_key
        and run_category_time.run_index in (pairs.before_run, pairs.after_run)
    where pairs.before_run is not null
),

changes as (
    select
        pair_categories.group_key,
        pair_categories.before_run,
        pair_categories.after_run,
        pair_categories.op_category,
        coalesce(before_time.kernel_time_ms, 0) as before_ms,
        coalesce(after_time.kernel_time_ms, 0) as after_ms
    from pair_categories
    left join run_category_time as before_time
        on before_time.group_key = pair_categories.group_key
        and before_time.run_index = pair_categories.before_run
        and before_time.op_category = pair_categories.op_category
    left join run_category_time as after_time
        on after_time.group_key = pair_categories.group_key
        and after_time.run_index = pair_categories.after_run
        and after_time.op_category = pair_categories.op_category
),

final as (
    select
        changes.group_key,
        after_trace.model,
        after_trace.mode,
        after_trace.platform,
        changes.op_category,
        changes.before_run,
        changes.after_run,
        before_trace.trace_id as before_trace_id,
        before_trace.file_name as before_file_name,
        before_trace.run_label as before_run_label,
        after_trace.trace_id as after_trace_id,
        after_trace.file_name as after_file_name,
        after_trace.run_label as after_run_label,
        changes.before_ms,
        changes.after_ms,
        changes.after_ms - changes.before_ms as change_ms,
        case when changes.before_ms > 0 then 100 * (changes.after_ms - changes.before_ms) / changes.before_ms end
            as change_percent
    from changes
    inner join first_traces as before_trace
        on before_trace.group_key = changes.group_key and before_trace.run_index = changes.before_run
    inner join first_traces as after_trace
        on after_trace.group_key = changes.group_key and after_trace.run_index = changes.after_run
    where changes.after_ms > changes.before_ms
)

select * from final
