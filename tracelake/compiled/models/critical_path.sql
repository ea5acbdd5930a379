

with gpu_nodes as (
    select * from "warehouse"."main"."replay_gpu_nodes"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

host_nodes as (
    select * from "warehouse"."main"."replay_host_nodes"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

steps as (
    select trace_id, step_number, host_start_us from "warehouse"."main"."profiler_steps"
    where trace_id in ('@@NEW_TRACE_IDS@@')
),

-- a copy's launch call that blocked until its own copy was done ends with that copy (its binding
-- edge below), so the copy's own edge is the call's predecessor on its thread: the edge that set the
-- call's start, and no cycle
self_blocking_calls as (
    select
        host_nodes.trace_id,
        host_nodes.event_idx as launch_call_idx,
        lag(host_nodes.event_idx) over (
            partition by host_nodes.trace_id, host_nodes.pid, host_nodes.tid order by host_nodes.thread_ordinal
        ) as previous_call_idx,
        host_nodes.waited_for_gpu,
        host_nodes.wait_end_us
    from host_nodes
),

gpu_predecessors as (
    select
        gpu_nodes.trace_id,
        gpu_nodes.event_idx as node_idx,
        'gpu' as node_kind,
        gpu_nodes.name,
        gpu_nodes.ts_us,
        gpu_nodes.end_us,
        gpu_nodes.dur_us as self_us,
        case
            when gpu_nodes.wait_event_idx is not null then 'stream_wait'
            else gpu_nodes.binding_edge
        end as binding_edge,
        case
            when gpu_nodes.wait_event_idx is not null then gpu_nodes.ts_us - gpu_nodes.wait_lag_us
            when gpu_nodes.binding_edge = 'launch' then gpu_nodes.launch_ts_us
            when gpu_nodes.binding_edge = 'stream' then gpu_nodes.previous_end_us
        end as ready_us,
        case
            when gpu_nodes.wait_event_idx is not null then gpu_nodes.wait_event_idx
            when gpu_nodes.binding_edge = 'launch' and self_blocking_calls.waited_for_gpu
                and self_blocking_calls.wait_end_us = gpu_nodes.end_us
                then self_blocking_calls.previous_call_idx
            when gpu_nodes.binding_edge = 'launch' then gpu_nodes.launch_call_idx
            when gpu_nodes.binding_edge = 'stream'
                then lag(gpu_nodes.event_idx) over (
                    partition by gpu_nodes.trace_id, gpu_nodes.device, gpu_nodes.stream order by gpu_nodes.chain_ordinal
                )
        end as predecessor_idx,
        gpu_nodes.step_number
    from gpu_nodes
    left join self_blocking_calls
        on gpu_nodes.trace_id = self_blocking_calls.trace_id
        and gpu_nodes.launch_call_idx = self_blocking_calls.launch_call_idx
),

waited_gpu_events as (
    select
        host_nodes.trace_id,
        host_nodes.event_idx,
        min(gpu_nodes.event_idx) as waited_event_idx
    from host_nodes
    inner join gpu_nodes
        on host_nodes.trace_id = gpu_nodes.trace_id
        and host_nodes.pid = gpu_nodes.host_pid
        and host_nodes.wait_end_us = gpu_nodes.end_us
    where host_nodes.waited_for_gpu
    group by host_nodes.trace_id, host_nodes.event_idx
),

host_predecessors as (
    select
        host_nodes.trace_id,
        host_nodes.event_idx as node_idx,
        'host' as node_kind,
        host_nodes.name,
        host_nodes.ts_us,
        host_nodes.end_us,
        host_nodes.own_us as self_us,
        case
            when waited_gpu_events.waited_event_idx is not null then 'gpu_wait'
            when host_nodes.host_gap_us is not null then 'host_order'
            else 'anchored'
        end as binding_edge,
        case
            when waited_gpu_events.waited_event_idx is not null then host_nodes.wait_end_us
            else host_nodes.ts_us - host_nodes.host_gap_us
        end as ready_us,
        coalesce(
            waited_gpu_events.waited_event_idx,
            lag(host_nodes.event_idx) over (
                partition by host_nodes.trace_id, host_nodes.pid, host_nodes.tid order by host_nodes.thread_ordinal
            )
        ) as predecessor_idx,
        cast(null as bigint) as step_number
    from host_nodes
    left join waited_gpu_events
        on host_nodes.trace_id = waited_gpu_events.trace_id
        and host_nodes.event_idx = waited_gpu_events.event_idx
),

graph_nodes as (
    select * from gpu_predecessors
    union all
    select * from host_predecessors
),

jumps_0 as (
    select trace_id, node_idx, predecessor_idx as up_idx from graph_nodes
),

jumps_1 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_0 as lower_jump
    left join jumps_0 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_2 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_1 as lower_jump
    left join jumps_1 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_3 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_2 as lower_jump
    left join jumps_2 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_4 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_3 as lower_jump
    left join jumps_3 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_5 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_4 as lower_jump
    left join jumps_4 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_6 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_5 as lower_jump
    left join jumps_5 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_7 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_6 as lower_jump
    left join jumps_6 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_8 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_7 as lower_jump
    left join jumps_7 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_9 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_8 as lower_jump
    left join jumps_8 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_10 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_9 as lower_jump
    left join jumps_9 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_11 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_10 as lower_jump
    left join jumps_10 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_12 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_11 as lower_jump
    left join jumps_11 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_13 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_12 as lower_jump
    left join jumps_12 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_14 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_13 as lower_jump
    left join jumps_13 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_15 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_14 as lower_jump
    left join jumps_14 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_16 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_15 as lower_jump
    left join jumps_15 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_17 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_16 as lower_jump
    left join jumps_16 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_18 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_17 as lower_jump
    left join jumps_17 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

jumps_19 as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_18 as lower_jump
    left join jumps_18 as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),

-- each step's last-ending GPU event (the trace's, for a trace without steps)
step_ends as (
    select trace_id, step_number, arg_max(node_idx, end_us) as node_idx
    from gpu_predecessors
    group by trace_id, step_number
    having step_number is not null or not exists (
        select 1 from steps where steps.trace_id = gpu_predecessors.trace_id
    )
),

reached_0 as (
    select trace_id, step_number, node_idx from step_ends
),

reached_1 as (
    select trace_id, step_number, node_idx from reached_0
    union
    select reached_0.trace_id, reached_0.step_number, jumps_0.up_idx
    from reached_0
    inner join jumps_0
        on reached_0.trace_id = jumps_0.trace_id
        and reached_0.node_idx = jumps_0.node_idx
    where jumps_0.up_idx is not null
),

reached_2 as (
    select trace_id, step_number, node_idx from reached_1
    union
    select reached_1.trace_id, reached_1.step_number, jumps_1.up_idx
    from reached_1
    inner join jumps_1
        on reached_1.trace_id = jumps_1.trace_id
        and reached_1.node_idx = jumps_1.node_idx
    where jumps_1.up_idx is not null
),

reached_3 as (
    select trace_id, step_number, node_idx from reached_2
    union
    select reached_2.trace_id, reached_2.step_number, jumps_2.up_idx
    from reached_2
    inner join jumps_2
        on reached_2.trace_id = jumps_2.trace_id
        and reached_2.node_idx = jumps_2.node_idx
    where jumps_2.up_idx is not null
),

reached_4 as (
    select trace_id, step_number, node_idx from reached_3
    union
    select reached_3.trace_id, reached_3.step_number, jumps_3.up_idx
    from reached_3
    inner join jumps_3
        on reached_3.trace_id = jumps_3.trace_id
        and reached_3.node_idx = jumps_3.node_idx
    where jumps_3.up_idx is not null
),

reached_5 as (
    select trace_id, step_number, node_idx from reached_4
    union
    select reached_4.trace_id, reached_4.step_number, jumps_4.up_idx
    from reached_4
    inner join jumps_4
        on reached_4.trace_id = jumps_4.trace_id
        and reached_4.node_idx = jumps_4.node_idx
    where jumps_4.up_idx is not null
),

reached_6 as (
    select trace_id, step_number, node_idx from reached_5
    union
    select reached_5.trace_id, reached_5.step_number, jumps_5.up_idx
    from reached_5
    inner join jumps_5
        on reached_5.trace_id = jumps_5.trace_id
        and reached_5.node_idx = jumps_5.node_idx
    where jumps_5.up_idx is not null
),

reached_7 as (
    select trace_id, step_number, node_idx from reached_6
    union
    select reached_6.trace_id, reached_6.step_number, jumps_6.up_idx
    from reached_6
    inner join jumps_6
        on reached_6.trace_id = jumps_6.trace_id
        and reached_6.node_idx = jumps_6.node_idx
    where jumps_6.up_idx is not null
),

reached_8 as (
    select trace_id, step_number, node_idx from reached_7
    union
    select reached_7.trace_id, reached_7.step_number, jumps_7.up_idx
    from reached_7
    inner join jumps_7
        on reached_7.trace_id = jumps_7.trace_id
        and reached_7.node_idx = jumps_7.node_idx
    where jumps_7.up_idx is not null
),

reached_9 as (
    select trace_id, step_number, node_idx from reached_8
    union
    select reached_8.trace_id, reached_8.step_number, jumps_8.up_idx
    from reached_8
    inner join jumps_8
        on reached_8.trace_id = jumps_8.trace_id
        and reached_8.node_idx = jumps_8.node_idx
    where jumps_8.up_idx is not null
),

reached_10 as (
    select trace_id, step_number, node_idx from reached_9
    union
    select reached_9.trace_id, reached_9.step_number, jumps_9.up_idx
    from reached_9
    inner join jumps_9
        on reached_9.trace_id = jumps_9.trace_id
        and reached_9.node_idx = jumps_9.node_idx
    where jumps_9.up_idx is not null
),

reached_11 as (
    select trace_id, step_number, node_idx from reached_10
    union
    select reached_10.trace_id, reached_10.step_number, jumps_10.up_idx
    from reached_10
    inner join jumps_10
        on reached_10.trace_id = jumps_10.trace_id
        and reached_10.node_idx = jumps_10.node_idx
    where jumps_10.up_idx is not null
),

reached_12 as (
    select trace_id, step_number, node_idx from reached_11
    union
    select reached_11.trace_id, reached_11.step_number, jumps_11.up_idx
    from reached_11
    inner join jumps_11
        on reached_11.trace_id = jumps_11.trace_id
        and reached_11.node_idx = jumps_11.node_idx
    where jumps_11.up_idx is not null
),

reached_13 as (
    select trace_id, step_number, node_idx from reached_12
    union
    select reached_12.trace_id, reached_12.step_number, jumps_12.up_idx
    from reached_12
    inner join jumps_12
        on reached_12.trace_id = jumps_12.trace_id
        and reached_12.node_idx = jumps_12.node_idx
    where jumps_12.up_idx is not null
),

reached_14 as (
    select trace_id, step_number, node_idx from reached_13
    union
    select reached_13.trace_id, reached_13.step_number, jumps_13.up_idx
    from reached_13
    inner join jumps_13
        on reached_13.trace_id = jumps_13.trace_id
        and reached_13.node_idx = jumps_13.node_idx
    where jumps_13.up_idx is not null
),

reached_15 as (
    select trace_id, step_number, node_idx from reached_14
    union
    select reached_14.trace_id, reached_14.step_number, jumps_14.up_idx
    from reached_14
    inner join jumps_14
        on reached_14.trace_id = jumps_14.trace_id
        and reached_14.node_idx = jumps_14.node_idx
    where jumps_14.up_idx is not null
),

reached_16 as (
    select trace_id, step_number, node_idx from reached_15
    union
    select reached_15.trace_id, reached_15.step_number, jumps_15.up_idx
    from reached_15
    inner join jumps_15
        on reached_15.trace_id = jumps_15.trace_id
        and reached_15.node_idx = jumps_15.node_idx
    where jumps_15.up_idx is not null
),

reached_17 as (
    select trace_id, step_number, node_idx from reached_16
    union
    select reached_16.trace_id, reached_16.step_number, jumps_16.up_idx
    from reached_16
    inner join jumps_16
        on reached_16.trace_id = jumps_16.trace_id
        and reached_16.node_idx = jumps_16.node_idx
    where jumps_16.up_idx is not null
),

reached_18 as (
    select trace_id, step_number, node_idx from reached_17
    union
    select reached_17.trace_id, reached_17.step_number, jumps_17.up_idx
    from reached_17
    inner join jumps_17
        on reached_17.trace_id = jumps_17.trace_id
        and reached_17.node_idx = jumps_17.node_idx
    where jumps_17.up_idx is not null
),

reached_19 as (
    select trace_id, step_number, node_idx from reached_18
    union
    select reached_18.trace_id, reached_18.step_number, jumps_18.up_idx
    from reached_18
    inner join jumps_18
        on reached_18.trace_id = jumps_18.trace_id
        and reached_18.node_idx = jumps_18.node_idx
    where jumps_18.up_idx is not null
),

reached_20 as (
    select trace_id, step_number, node_idx from reached_19
    union
    select reached_19.trace_id, reached_19.step_number, jumps_19.up_idx
    from reached_19
    inner join jumps_19
        on reached_19.trace_id = jumps_19.trace_id
        and reached_19.node_idx = jumps_19.node_idx
    where jumps_19.up_idx is not null
),

final as (
    select
        reached.trace_id,
        reached.step_number,
        graph_nodes.node_idx,
        graph_nodes.node_kind,
        graph_nodes.name,
        graph_nodes.ts_us,
        graph_nodes.end_us,
        graph_nodes.binding_edge,
        graph_nodes.predecessor_idx,
        graph_nodes.self_us,
        greatest(graph_nodes.end_us - graph_nodes.self_us - graph_nodes.ready_us, 0.0) as lag_us
    from reached_20 as reached
    inner join graph_nodes
        on reached.trace_id = graph_nodes.trace_id
        and reached.node_idx = graph_nodes.node_idx
    left join steps
        on reached.trace_id = steps.trace_id
        and reached.step_number = steps.step_number
    -- a step's path stops where the step begins
    where steps.host_start_us is null or graph_nodes.end_us > steps.host_start_us
)

select * from final
