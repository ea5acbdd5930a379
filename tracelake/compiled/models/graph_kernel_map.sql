

with trace_files as (
    select * from "warehouse"."staging"."stg_trace__files"
),

launches as (
    select * from "warehouse"."intermediate"."int_gpu_ops_linked_to_launches"
    where is_graph_launch and trace_id in ('@@NEW_TRACE_IDS@@')
),

gpu_ops as (
    select * from "warehouse"."staging"."stg_trace__gpu_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

host_ops as (
    select * from "warehouse"."staging"."stg_trace__host_ops"
    where category in ('cuda_runtime', 'cuda_driver') and trace_id in ('@@NEW_TRACE_IDS@@')
),

annotations as (
    select trace_id, name, ts_us, end_us from "warehouse"."staging"."stg_trace__events"
    where category = 'user_annotation'
),

dispatches as (
    select * from "warehouse"."intermediate"."int_graph_capture_dispatches"
),

replay_captures as (
    select trace_id, unnest(graph_capture_trace_ids) as capture_trace_id
    from trace_files
    where graph_capture_trace_ids is not null and trace_id in ('@@NEW_TRACE_IDS@@')
),

capture_annotations as (
    -- `capture_<bs>_<mode>`: the record_function TraceLens' capture patches wrap a capture in
    select
        trace_id,
        min(try_cast(regexp_extract(name, '^capture_(\d+)_', 1) as integer)) as batch_size,
        min(upper(regexp_extract(name, '^capture_\d+_([A-Za-z]+)', 1))) as mode
    from annotations
    where regexp_matches(name, '^capture_\d+_')
    group by trace_id
),

captures as (
    select
        replay_captures.trace_id,
        replay_captures.capture_trace_id,
        coalesce(capture_files.graph_capture_batch_size, capture_annotations.batch_size) as batch_size,
        coalesce(capture_files.graph_capture_mode, capture_annotations.mode) as mode
    from replay_captures
    inner join trace_files as capture_files on replay_captures.capture_trace_id = capture_files.trace_id
    left join capture_annotations on replay_captures.capture_trace_id = capture_annotations.trace_id
),

capture_roots as (
    select distinct capture_trace_id, root_ordinal, root_dispatch_count,
        count(*) over (partition by capture_trace_id) as capture_root_count
    from (select distinct capture_trace_id, root_ordinal, root_dispatch_count from dispatches)
),

graph_launch_calls as (
    select
        host_ops.trace_id,
        host_ops.event_idx as graph_launch_event_idx,
        host_ops.ts_us,
        host_ops.end_us,
        row_number() over (partition by host_ops.trace_id order by host_ops.ts_us, host_ops.event_idx) as launch_ordinal
    from host_ops
    inner join (select distinct trace_id, launch_event_idx from launches) as graph_launches
        on host_ops.trace_id = graph_launches.trace_id
        and host_ops.event_idx = graph_launches.launch_event_idx
    where host_ops.trace_id in (select trace_id from replay_captures)
),

launch_steps as (
    -- the step annotation enclosing each launch, its batch size, and how many launches it holds
    select
        graph_launch_calls.*,
        annotations.ts_us as step_start_us,
        coalesce(
            try_cast(regexp_extract(annotations.name, '^execute_(\d+)_', 1) as integer),
            try_cast(regexp_extract(annotations.name, '\bbs=(\d+)', 1) as integer)
        ) as step_batch_size
    from graph_launch_calls
    left join annotations
        on graph_launch_calls.trace_id = annotations.trace_id
        and annotations.ts_us <= graph_launch_calls.ts_us
        and annotations.end_us >= graph_launch_calls.end_us
        and (regexp_matches(annotations.name, '^execute_\d+_') or regexp_matches(annotations.name, '\bbs=\d+'))
    qualify row_number() over (
        partition by graph_launch_calls.trace_id, graph_launch_calls.graph_launch_event_idx
        order by annotations.end_us - annotations.ts_us nulls last
    ) = 1
),

launch_steps_counted as (
    -- a launch outside every step annotation is a step of its own
    select
        *,
        count(*) over (partition by trace_id, coalesce(step_start_us, -graph_launch_event_idx)) as launches_in_step,
        row_number() over (
            partition by trace_id, coalesce(step_start_us, -graph_launch_event_idx) order by ts_us, graph_launch_event_idx
        ) as ordinal_in_step
    from launch_steps
),

replayed as (
    select
        launches.trace_id,
        launches.launch_event_idx as graph_launch_event_idx,
        gpu_ops.event_idx as gpu_event_idx,
        gpu_ops.name,
        case
            when gpu_ops.category = 'gpu_memcpy' then 'memcpy'
            when gpu_ops.category = 'gpu_memset' or gpu_ops.name ilike '%fillBuffer%' then 'memset'
            else gpu_ops.name
        end as match_key,
        row_number() over (
            partition by launches.trace_id, launches.launch_event_idx order by gpu_ops.ts_us, gpu_ops.event_idx
        ) as kernel_ordinal,
        count(*) over (partition by launches.trace_id, launches.launch_event_idx) as launch_kernel_count
    from launches
    inner join gpu_ops
        on launches.trace_id = gpu_ops.trace_id
        and launches.gpu_event_idx = gpu_ops.event_idx
),

replayed_keyed as (
    select
        *,
        row_number() over (
            partition by trace_id, graph_launch_event_idx, match_key order by kernel_ordinal
        ) as key_occurrence
    from replayed
),

launch_kernel_counts as (
    select distinct trace_id, graph_launch_event_idx, launch_kernel_count from replayed
),

candidate_roots as (
    select
        launch_steps_counted.trace_id,
        launch_steps_counted.graph_launch_event_idx,
        launch_steps_counted.launch_ordinal,
        captures.capture_trace_id,
        captures.batch_size,
        captures.mode,
        capture_roots.root_ordinal,
        capture_roots.root_dispatch_count = launch_kernel_counts.launch_kernel_count as counts_agree,
        coalesce(captures.batch_size >= launch_steps_counted.step_batch_size, false) as batch_fits,
        case when launch_steps_counted.launches_in_step = 1 then captures.mode = 'FULL'
             else captures.mode = 'PIECEWISE' end as mode_fits
    from launch_steps_counted
    inner join captures on launch_steps_counted.trace_id = captures.trace_id
    inner join capture_roots
        on captures.capture_trace_id = capture_roots.capture_trace_id
        -- a PIECEWISE capture's n-th root is the step's n-th graph
        and (capture_roots.capture_root_count = 1 or capture_roots.root_ordinal = launch_steps_counted.ordinal_in_step)
    inner join launch_kernel_counts
        on launch_steps_counted.trace_id = launch_kernel_counts.trace_id
        and launch_steps_counted.graph_launch_event_idx = launch_kernel_counts.graph_launch_event_idx
),

chosen_roots as (
    select *
    from candidate_roots
    qualify row_number() over (
        partition by trace_id, graph_launch_event_idx
        -- the smallest capture at least the step's batch; when none is, the largest below it
        order by counts_agree desc, batch_fits desc, case when batch_fits then batch_size else -batch_size end,
            mode_fits desc, capture_trace_id, root_ordinal
    ) = 1
),

matched as (
    select
        replayed_keyed.trace_id,
        replayed_keyed.gpu_event_idx,
        replayed_keyed.graph_launch_event_idx,
        chosen_roots.launch_ordinal,
        replayed_keyed.kernel_ordinal,
        replayed_keyed.name as kernel_name,
        chosen_roots.capture_trace_id,
        chosen_roots.batch_size as capture_batch_size,
        chosen_roots.mode as capture_mode,
        chosen_roots.root_ordinal as capture_root_ordinal,
        dispatches.dispatch_ordinal,
        dispatches.dispatch_event_idx,
        dispatches.dispatch_name,
        dispatches.launcher_op_idx as capture_launcher_op_idx,
        chosen_roots.counts_agree,
        replayed_keyed.launch_kernel_count,
        dispatches.dispatch_ordinal = replayed_keyed.kernel_ordinal as same_position
    from replayed_keyed
    inner join chosen_roots
        on replayed_keyed.trace_id = chosen_roots.trace_id
        and replayed_keyed.graph_launch_event_idx = chosen_roots.graph_launch_event_idx
    inner join dispatches
        on chosen_roots.capture_trace_id = dispatches.capture_trace_id
        and chosen_roots.root_ordinal = dispatches.root_ordinal
        and replayed_keyed.match_key = dispatches.match_key
        and replayed_keyed.key_occurrence = dispatches.key_occurrence
),

final as (
    select
        trace_id,
        gpu_event_idx,
        graph_launch_event_idx,
        launch_ordinal,
        kernel_ordinal,
        kernel_name,
        capture_trace_id,
        capture_batch_size,
        capture_mode,
        capture_root_ordinal,
        dispatch_ordinal,
        dispatch_event_idx,
        dispatch_name,
        capture_launcher_op_idx,
        case when bool_and(counts_agree and same_position) over (partition by trace_id, graph_launch_event_idx)
                  and count(*) over (partition by trace_id, graph_launch_event_idx) = launch_kernel_count
             then 'position' else 'name_order' end as match_method,
        launch_ordinal * 10000000000 as graft_offset
    from matched
)

select * from final
