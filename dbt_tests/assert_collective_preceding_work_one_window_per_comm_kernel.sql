{#- collective_preceding_work: every communication kernel has exactly one gpu_idle row, its idle time
    lies within its window, and the GPU and host times of a window never exceed it per group
    (µs, 1e-6 tolerance). Returns the communication kernels that break one. -#}
with comm_kernels as (
    select trace_id, event_idx from {{ ref('kernels') }}
    where is_comm
),

preceding_work as (
    select * from {{ ref('collective_preceding_work') }}
),

window_checks as (
    select
        trace_id,
        comm_event_idx,
        count(*) filter (where work_side = 'gpu_idle') as idle_rows,
        bool_or(idle_us < -1e-6 or idle_us > window_us + 1e-6) as idle_out_of_window,
        bool_or(window_us < 0) as negative_window
    from preceding_work
    group by trace_id, comm_event_idx
),

checked as (
    select
        comm_kernels.trace_id,
        comm_kernels.event_idx,
        coalesce(window_checks.idle_rows, 0) as idle_rows,
        window_checks.idle_out_of_window,
        window_checks.negative_window
    from comm_kernels
    left join window_checks
        on comm_kernels.trace_id = window_checks.trace_id
        and comm_kernels.event_idx = window_checks.comm_event_idx
)

select *
from checked
where idle_rows <> 1 or idle_out_of_window or negative_window
