{#- Why a rank reaches a collective late: for each communication kernel of a trace (in time order),
    the work of that rank in the window since its previous communication kernel ended (the first
    one: since the trace's first GPU event), up to this kernel's start. Rows per window:
    - `gpu`: the other GPU events (kernels, copies, fills) overlapping the window, clipped to it, by
      the op that launched them (kernels.cpu_op_name), the root of that op's tree and the nn.Module
      around the launching op: kernel_us and kernel_count;
    - `host`: the host's root cpu ops (every thread) overlapping the window, clipped to it, by name
      and module: host_us and host_op_count (summed: ops of two threads may overlap in time);
    - `gpu_idle`: always one, the window's time no GPU event covers (idle_us), so every
      communication kernel has a row.
    Keyed by (trace_id, comm_event_idx): the kernel's event_idx in `kernels`; a trace of a job also
    carries its job, rank and the collective instance the kernel belongs to (collective_calls), so
    a straggler's rows can be set against the median rank's for one collective instance. -#}
{{ config(materialized='view') }}

with kernels as (
    select * from {{ ref('kernels') }}
),

cpu_ops as (
    select * from {{ ref('cpu_ops') }}
),

op_ancestors as (
    select * from {{ ref('cpu_op_ancestors') }}
),

collective_calls as (
    select * from {{ ref('collective_calls') }}
),

accumulated_intervals as (
    select * from {{ ref('int_gpu_intervals_accumulated') }}
    where event_scope = 'all_events' and interval_set = 'all'
),

trace_starts as (
    select trace_id, min(ts_us) as first_gpu_start_us
    from kernels
    group by trace_id
),

comm_kernels as (
    select
        trace_id,
        event_idx,
        name,
        stream,
        ts_us,
        row_number() over (partition by trace_id order by ts_us, event_idx) as comm_ordinal,
        max(end_us) over (
            partition by trace_id
            order by ts_us, event_idx
            rows between unbounded preceding and 1 preceding
        ) as previous_comm_end_us
    from kernels
    where is_comm
),

comm_windows as (
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        comm_kernels.name,
        comm_kernels.stream,
        comm_kernels.comm_ordinal,
        comm_kernels.ts_us as window_end_us,
        -- an earlier collective still running when this one starts leaves an empty window
        least(coalesce(comm_kernels.previous_comm_end_us, trace_starts.first_gpu_start_us), comm_kernels.ts_us)
            as window_start_us,
        case when comm_kernels.previous_comm_end_us is null then 'since_trace_start'
             else 'since_previous_collective' end as window_kind,
        'all' as interval_set
    from comm_kernels
    inner join trace_starts on comm_kernels.trace_id = trace_starts.trace_id
),

busy_before_start as (
    {{ cover_measure_until('comm_windows', 'window_start_us', 'accumulated_intervals', 'busy_before_start_us') }}
),

busy_before_end as (
    {{ cover_measure_until('busy_before_start', 'window_end_us', 'accumulated_intervals', 'busy_before_end_us') }}
),

windows as (
    select
        *,
        window_end_us - window_start_us as window_us,
        window_end_us - window_start_us - (busy_before_end_us - busy_before_start_us) as gpu_idle_us
    from busy_before_end
),

launching_op_ids as (
    select distinct trace_id, cpu_op_id as op_id
    from kernels
    where cpu_op_id is not null and not is_comm
),

op_roots as (
    select op_ancestors.trace_id, op_ancestors.op_id, arg_max(op_ancestors.ancestor_op_id, op_ancestors.distance) as root_op_id
    from op_ancestors
    inner join launching_op_ids
        on op_ancestors.trace_id = launching_op_ids.trace_id
        and op_ancestors.op_id = launching_op_ids.op_id
    group by op_ancestors.trace_id, op_ancestors.op_id
),

launched_work as (
    select
        kernels.trace_id,
        kernels.ts_us,
        kernels.end_us,
        coalesce(kernels.cpu_op_name, kernels.launch_name, '(unlinked)') as op_name,
        coalesce(root_ops.name, kernels.cpu_op_name, kernels.launch_name, '(unlinked)') as root_op_name,
        {{ list_last('launching_ops.module_chain') }} as module_name
    from kernels
    left join op_roots
        on kernels.trace_id = op_roots.trace_id
        and kernels.cpu_op_id = op_roots.op_id
    left join cpu_ops as root_ops
        on op_roots.trace_id = root_ops.trace_id
        and op_roots.root_op_id = root_ops.op_id
    left join cpu_ops as launching_ops
        on kernels.trace_id = launching_ops.trace_id
        and kernels.cpu_op_id = launching_ops.op_id
    where not kernels.is_comm
),

gpu_work as (
    select
        windows.trace_id,
        windows.event_idx as comm_event_idx,
        'gpu' as work_side,
        launched_work.root_op_name,
        launched_work.op_name,
        launched_work.module_name,
        sum(least(launched_work.end_us, windows.window_end_us)
            - greatest(launched_work.ts_us, windows.window_start_us)) as kernel_us,
        count(*) as kernel_count,
        cast(null as double) as host_us,
        cast(null as bigint) as host_op_count,
        cast(null as double) as idle_us
    from windows
    inner join launched_work
        on windows.trace_id = launched_work.trace_id
        and launched_work.ts_us < windows.window_end_us
        and launched_work.end_us > windows.window_start_us
    group by windows.trace_id, windows.event_idx, launched_work.root_op_name, launched_work.op_name,
        launched_work.module_name
),

host_work as (
    select
        windows.trace_id,
        windows.event_idx as comm_event_idx,
        'host' as work_side,
        cpu_ops.name as root_op_name,
        cpu_ops.name as op_name,
        {{ list_last('cpu_ops.module_chain') }} as module_name,
        cast(null as double) as kernel_us,
        cast(null as bigint) as kernel_count,
        sum(least(cpu_ops.end_us, windows.window_end_us) - greatest(cpu_ops.ts_us, windows.window_start_us))
            as host_us,
        count(*) as host_op_count,
        cast(null as double) as idle_us
    from windows
    inner join cpu_ops
        on windows.trace_id = cpu_ops.trace_id
        and cpu_ops.ts_us < windows.window_end_us
        and cpu_ops.end_us > windows.window_start_us
    where cpu_ops.is_cpu_root
    group by windows.trace_id, windows.event_idx, cpu_ops.name, {{ list_last('cpu_ops.module_chain') }}
),

gpu_idle as (
    select
        trace_id,
        event_idx as comm_event_idx,
        'gpu_idle' as work_side,
        cast(null as varchar) as root_op_name,
        cast(null as varchar) as op_name,
        cast(null as varchar) as module_name,
        cast(null as double) as kernel_us,
        cast(null as bigint) as kernel_count,
        cast(null as double) as host_us,
        cast(null as bigint) as host_op_count,
        gpu_idle_us as idle_us
    from windows
),

window_work as (
    select * from gpu_work
    union all
    select * from host_work
    union all
    select * from gpu_idle
),

final as (
    select
        collective_calls.job_id,
        collective_calls.rank,
        collective_calls.instance_id,
        window_work.trace_id,
        window_work.comm_event_idx,
        windows.comm_ordinal,
        windows.name as comm_kernel_name,
        windows.stream as comm_stream,
        windows.window_kind,
        windows.window_start_us,
        windows.window_end_us,
        windows.window_us,
        window_work.work_side,
        window_work.root_op_name,
        window_work.op_name,
        window_work.module_name,
        window_work.kernel_us,
        window_work.kernel_count,
        window_work.host_us,
        window_work.host_op_count,
        window_work.idle_us
    from window_work
    inner join windows
        on window_work.trace_id = windows.trace_id
        and window_work.comm_event_idx = windows.event_idx
    left join collective_calls
        on window_work.trace_id = collective_calls.trace_id
        and window_work.comm_event_idx = collective_calls.event_idx
)

select * from final
