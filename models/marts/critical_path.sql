{#- The critical path of each profiler step (the whole trace when it has no steps): the chain of
    binding edges of the replay's dependency graph (replay_gpu_nodes, replay_host_nodes) that ends
    at the step's last-ending GPU event, one row per node on it. Each node's binding predecessor is
    the edge that set its measured start: a GPU event's stream predecessor, launch call or the event
    of another stream it waited for; a host call's previous call on its thread, or for a call that
    waited the GPU event it waited for. The chain is followed by pointer doubling (each node's
    2^k-th predecessor, k < var critical_path_doublings), so the path is found with set operations. -#}
{{ config(materialized='incremental') }}

{%- set doublings = var('critical_path_doublings') %}

with gpu_nodes as (
    select * from {{ ref('replay_gpu_nodes') }}
    where {{ is_new_trace() }}
),

host_nodes as (
    select * from {{ ref('replay_host_nodes') }}
    where {{ is_new_trace() }}
),

steps as (
    select trace_id, step_number, host_start_us from {{ ref('profiler_steps') }}
    where {{ is_new_trace() }}
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
{%- for k in range(1, doublings) %}

jumps_{{ k }} as (
    select lower_jump.trace_id, lower_jump.node_idx, upper_jump.up_idx
    from jumps_{{ k - 1 }} as lower_jump
    left join jumps_{{ k - 1 }} as upper_jump
        on lower_jump.trace_id = upper_jump.trace_id
        and lower_jump.up_idx = upper_jump.node_idx
),
{%- endfor %}

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
{%- for k in range(doublings) %}

reached_{{ k + 1 }} as (
    select trace_id, step_number, node_idx from reached_{{ k }}
    union
    select reached_{{ k }}.trace_id, reached_{{ k }}.step_number, jumps_{{ k }}.up_idx
    from reached_{{ k }}
    inner join jumps_{{ k }}
        on reached_{{ k }}.trace_id = jumps_{{ k }}.trace_id
        and reached_{{ k }}.node_idx = jumps_{{ k }}.node_idx
    where jumps_{{ k }}.up_idx is not null
),
{%- endfor %}

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
    from reached_{{ doublings }} as reached
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
