

with recursive merged_intervals as (
    select trace_id, merged_start_us, merged_end_us
    from "warehouse"."intermediate"."int_gpu_intervals_merged"
    where event_scope = 'linked' and interval_set = 'all' and trace_id in ('@@NEW_TRACE_IDS@@')
),

kernels as (
    -- the replay's own launch for a kernel a graph replayed (the captured launch the merge maps it
    -- to is not a host event of this timeline)
    select trace_id, event_idx, ts_us, end_us, is_graph_launch,
        coalesce(graph_launch_event_idx, launch_event_idx) as launch_event_idx, stream, is_comm
    from "warehouse"."main"."kernels"
    where is_linked and trace_id in ('@@NEW_TRACE_IDS@@')
),

host_ops as (
    select trace_id, event_idx, category, name, ts_us, end_us, pid, tid, parent_idx, depth, in_tree
    from "warehouse"."staging"."stg_trace__host_ops"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

host_tree as (
    select * from host_ops where in_tree
),

gaps as (
    select
        trace_id,
        row_number() over (partition by trace_id order by merged_end_us) as gap_id,
        merged_end_us as start_us,
        next_busy_start_us as end_us
    from (
        select
            *,
            lead(merged_start_us) over (partition by trace_id order by merged_start_us) as next_busy_start_us
        from merged_intervals
    ) as busy_intervals
    where next_busy_start_us is not null
),

kernels_before as (select trace_id, gap_id, event_idx, is_graph_launch, stream, is_comm
    from (
        select
            gaps.trace_id, gaps.gap_id, kernels.event_idx, kernels.is_graph_launch, kernels.stream, kernels.is_comm,
            row_number() over (
                partition by gaps.trace_id, gaps.gap_id order by kernels.ts_us desc, kernels.event_idx desc
            ) as kernel_rank
        from gaps
        inner join kernels on gaps.trace_id = kernels.trace_id and gaps.start_us = kernels.end_us
    ) as ranked_kernels
    where kernel_rank = 1
),

kernels_after as (select trace_id, gap_id, event_idx, is_graph_launch, launch_event_idx, stream, is_comm
    from (
        select
            gaps.trace_id, gaps.gap_id, kernels.event_idx, kernels.is_graph_launch, kernels.launch_event_idx,
            kernels.stream, kernels.is_comm,
            row_number() over (partition by gaps.trace_id, gaps.gap_id order by kernels.event_idx) as kernel_rank
        from gaps
        inner join kernels on gaps.trace_id = kernels.trace_id and gaps.end_us = kernels.ts_us
    ) as ranked_kernels
    where kernel_rank = 1
),

next_launches as (
    select
        kernels_after.trace_id,
        kernels_after.gap_id,
        host_ops.event_idx as launch_event_idx,
        host_ops.name as launch_name,
        host_ops.ts_us as launch_ts_us,
        host_ops.pid,
        host_ops.tid
    from kernels_after
    inner join host_ops
        on kernels_after.trace_id = host_ops.trace_id
        and kernels_after.launch_event_idx = host_ops.event_idx
),

gap_instants as (select gaps.trace_id, gaps.gap_id, 'start' as instant, gaps.start_us as at_us, next_launches.pid, next_launches.tid
    from gaps
    inner join next_launches on gaps.trace_id = next_launches.trace_id and gaps.gap_id = next_launches.gap_id
    union all
    select gaps.trace_id, gaps.gap_id, 'end' as instant, gaps.end_us as at_us, next_launches.pid, next_launches.tid
    from gaps
    inner join next_launches on gaps.trace_id = next_launches.trace_id and gaps.gap_id = next_launches.gap_id
),

host_starts_and_instants as (
    select
        trace_id, pid, tid, ts_us as at_us, 0 as is_instant, depth, event_idx as started_event_idx,
        cast(null as bigint) as gap_id, cast(null as varchar) as instant
    from host_tree
    union all
    select
        trace_id, pid, tid, at_us, 1 as is_instant, cast(null as bigint) as depth,
        cast(null as bigint) as started_event_idx, gap_id, instant
    from gap_instants
),

latest_started as (select trace_id, gap_id, instant, at_us, anchor_event_idx
    from (
        select
            *,
            last_value(started_event_idx ignore nulls) over (
                partition by trace_id, pid, tid
                order by at_us, is_instant, depth, started_event_idx
                rows between unbounded preceding and current row
            ) as anchor_event_idx
        from host_starts_and_instants
    ) as sorted_instants
    where is_instant = 1 and anchor_event_idx is not null
),

host_stack as (
    select latest_started.trace_id, latest_started.gap_id, latest_started.instant, latest_started.at_us,
        host_ops.event_idx, host_ops.parent_idx, host_ops.category, host_ops.name, host_ops.ts_us,
        host_ops.end_us, host_ops.depth
    from latest_started
    inner join host_tree as host_ops
        on latest_started.trace_id = host_ops.trace_id
        and latest_started.anchor_event_idx = host_ops.event_idx
    union all
    select host_stack.trace_id, host_stack.gap_id, host_stack.instant, host_stack.at_us,
        host_ops.event_idx, host_ops.parent_idx, host_ops.category, host_ops.name, host_ops.ts_us,
        host_ops.end_us, host_ops.depth
    from host_stack
    inner join host_tree as host_ops
        on host_stack.trace_id = host_ops.trace_id
        and host_stack.parent_idx = host_ops.event_idx
),

spanning_calls as (
    select
        trace_id,
        gap_id,
        instant,
        case when category in ('cuda_runtime', 'cuda_driver') then 'runtime' else category end as call_kind,
        event_idx,
        name,
        ts_us,
        end_us,
        depth
    from host_stack
    where ts_us <= at_us and end_us >= at_us
),

innermost_calls as (
    select
        trace_id,
        gap_id,
        instant,
        call_kind,
        arg_max(event_idx, depth) as event_idx,
        arg_max(name, depth) as name,
        arg_max(ts_us, depth) as ts_us,
        arg_max(end_us, depth) as end_us
    from spanning_calls
    group by trace_id, gap_id, instant, call_kind
),

data_loading_frames as (
    -- the outermost data-loading frame (var data_loading_frame_pattern) spanning each instant: the
    -- host was fetching a batch, whatever op (a copy, a collate) ran innermost
    select trace_id, gap_id, instant, arg_min(name, depth) as name
    from spanning_calls
    where regexp_matches(name, '(enumerate\(DataLoader\)|DataLoaderIter|torch/utils/data/)')
    group by trace_id, gap_id, instant
),

host_activity as (
    select
        max(name) filter (where instant = 'start' and call_kind = 'cpu_op') as start_cpu_op_name,
        max(event_idx) filter (where instant = 'start' and call_kind = 'cpu_op') as start_cpu_op_event_idx,
        max(end_us) filter (where instant = 'start' and call_kind = 'cpu_op') as start_cpu_op_end_us,
        max(name) filter (where instant = 'start' and call_kind = 'python_function') as start_python_function_name,
        max(event_idx) filter (where instant = 'start' and call_kind = 'python_function') as start_python_function_event_idx,
        max(end_us) filter (where instant = 'start' and call_kind = 'python_function') as start_python_function_end_us,
        max(name) filter (where instant = 'start' and call_kind = 'runtime') as start_runtime_name,
        max(event_idx) filter (where instant = 'start' and call_kind = 'runtime') as start_runtime_event_idx,
        max(end_us) filter (where instant = 'start' and call_kind = 'runtime') as start_runtime_end_us,
        max(ts_us) filter (where instant = 'start' and call_kind = 'runtime') as start_runtime_ts_us,
        max(name) filter (where instant = 'end' and call_kind = 'cpu_op') as end_cpu_op_name,
        max(event_idx) filter (where instant = 'end' and call_kind = 'cpu_op') as end_cpu_op_event_idx,
        max(name) filter (where instant = 'end' and call_kind = 'python_function') as end_python_function_name,
        max(event_idx) filter (where instant = 'end' and call_kind = 'python_function') as end_python_function_event_idx,
        max(name) filter (where instant = 'end' and call_kind = 'runtime') as end_runtime_name,
        max(event_idx) filter (where instant = 'end' and call_kind = 'runtime') as end_runtime_event_idx,
        trace_id,
        gap_id
    from innermost_calls
    group by trace_id, gap_id
),

described_gaps as (
    select
        gaps.trace_id || ':' || gaps.gap_id as gap_key,
        gaps.trace_id,
        gaps.gap_id,
        gaps.start_us,
        gaps.end_us,
        gaps.end_us - gaps.start_us as duration_us,
        kernels_before.event_idx as kernel_before_event_idx,
        kernels_after.event_idx as kernel_after_event_idx,
        coalesce(kernels_before.is_graph_launch and kernels_after.is_graph_launch, false) as is_inside_graph_replay,
        next_launches.launch_event_idx as next_launch_event_idx,
        next_launches.launch_name as next_launch_name,
        next_launches.launch_ts_us as next_launch_ts_us,
        gaps.end_us - next_launches.launch_ts_us as launch_lead_us,
        next_launches.launch_ts_us - gaps.start_us as launch_delay_us,
        host_activity.start_cpu_op_name,
        host_activity.start_cpu_op_event_idx,
        host_activity.start_cpu_op_end_us,
        host_activity.start_python_function_name,
        host_activity.start_python_function_event_idx,
        host_activity.start_python_function_end_us,
        host_activity.start_runtime_name,
        host_activity.start_runtime_event_idx,
        host_activity.start_runtime_end_us,
        host_activity.start_runtime_ts_us,
        host_activity.end_cpu_op_name,
        host_activity.end_cpu_op_event_idx,
        host_activity.end_python_function_name,
        host_activity.end_python_function_event_idx,
        host_activity.end_runtime_name,
        host_activity.end_runtime_event_idx,
        start_data_loading.name as start_data_loading_frame,
        end_data_loading.name as end_data_loading_frame,
        next_launches.pid as host_pid,
        next_launches.tid as host_tid,
        count(*) over (partition by gaps.trace_id) as gap_count,
        coalesce(kernels_before.is_comm or kernels_after.is_comm, false) as touches_collective,
        kernels_before.stream is distinct from kernels_after.stream as changes_stream
    from gaps
    left join kernels_before on gaps.trace_id = kernels_before.trace_id and gaps.gap_id = kernels_before.gap_id
    left join kernels_after on gaps.trace_id = kernels_after.trace_id and gaps.gap_id = kernels_after.gap_id
    left join next_launches on gaps.trace_id = next_launches.trace_id and gaps.gap_id = next_launches.gap_id
    left join host_activity on gaps.trace_id = host_activity.trace_id and gaps.gap_id = host_activity.gap_id
    left join data_loading_frames as start_data_loading
        on gaps.trace_id = start_data_loading.trace_id and gaps.gap_id = start_data_loading.gap_id
        and start_data_loading.instant = 'start'
    left join data_loading_frames as end_data_loading
        on gaps.trace_id = end_data_loading.trace_id and gaps.gap_id = end_data_loading.gap_id
        and end_data_loading.instant = 'end'
),

gap_evidence as (
    select
        *,launch_lead_us - 50.0 <= greatest(launch_delay_us, 0) as was_launched_late,
        coalesce(start_runtime_name in ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize', 'cuCtxSynchronize', 'cuStreamSynchronize', 'cuEventSynchronize', 'hipDeviceSynchronize', 'hipStreamSynchronize', 'hipEventSynchronize', 'cudaMemcpy', 'cudaMemcpy2D', 'cuMemcpyDtoH_v2', 'cuMemcpyHtoD_v2', 'hipMemcpy', 'hipMemcpy2D', 'hipMemcpyWithStream', 'hipMemcpyDtoH', 'hipMemcpyHtoD'), false) as starts_in_synchronizing_call,
        coalesce(start_runtime_end_us >= end_us - 1.0, false) as runtime_call_spans_gap,coalesce(next_launch_ts_us >= start_runtime_ts_us, false) as issued_during_runtime_call
    from described_gaps
),

classified_gaps as (
    select
        *,
        case
            when (gap_id = 1 or gap_id = gap_count) and duration_us >= 1000.0 then 'window_edge'
            when is_inside_graph_replay then 'queued_waiting'
            when was_launched_late and duration_us >= 1000.0 then 'host_work'
            when was_launched_late then 'launch_bound'
            when starts_in_synchronizing_call and runtime_call_spans_gap and issued_during_runtime_call then 'sync_blocked'
            else 'queued_waiting'
        end as gap_class,
        case
            when (gap_id = 1 or gap_id = gap_count) and duration_us >= 1000.0
                then case when gap_id = 1 then 'first_gap_of_window' else 'last_gap_of_window' end
            when is_inside_graph_replay then 'inside_graph_replay'
            when was_launched_late and starts_in_synchronizing_call and not runtime_call_spans_gap
                then 'launched_after_sync_returned'
            when was_launched_late then 'launched_late'
            when starts_in_synchronizing_call and runtime_call_spans_gap and issued_during_runtime_call
                then 'sync_call_spans_gap'
            when touches_collective then 'waits_on_collective'
            when changes_stream then 'waits_on_other_stream'
            else 'queued_ahead'
        end as gap_class_reason
    from gap_evidence
),

final as (
    select
        gap_key,
        trace_id,
        gap_id,
        start_us,
        end_us,
        duration_us,
        kernel_before_event_idx,
        kernel_after_event_idx,
        is_inside_graph_replay,
        next_launch_event_idx,
        next_launch_name,
        next_launch_ts_us,
        launch_lead_us,
        launch_delay_us,
        start_cpu_op_name,
        start_cpu_op_event_idx,
        start_cpu_op_end_us,
        start_python_function_name,
        start_python_function_event_idx,
        start_python_function_end_us,
        start_runtime_name,
        start_runtime_event_idx,
        start_runtime_end_us,
        start_runtime_ts_us,
        end_cpu_op_name,
        end_cpu_op_event_idx,
        end_python_function_name,
        end_python_function_event_idx,
        end_runtime_name,
        end_runtime_event_idx,
        start_data_loading_frame,
        end_data_loading_frame,
        host_pid,
        host_tid,
        gap_class,
        gap_class_reason
    from classified_gaps
)

select * from final
