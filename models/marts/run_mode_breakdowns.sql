{#- Training vs inference per model and platform: the mean GPU time breakdown of each side's traces
    with a GPU timeline (graph replays count with their mode), and how many runs and traces it has
    (a run as run_groups defines it: the ranks of one job are one run). A view. -#}
{{ config(materialized='view') }}

with run_groups as (
    select * from {{ ref('run_groups') }}
),

sides as (
    select model, group_platform, split_part(mode, '-', 1) as mode, group_key, run_index, total_time_ms, computation_time_ms,
        exposed_comm_time_ms, exposed_memcpy_time_ms, idle_time_ms
    from run_groups
    where has_gpu_timeline and split_part(mode, '-', 1) in ('training', 'inference')
),

final as (
    select
        model,
        group_platform,
        mode,
        avg(total_time_ms) as total_time_ms,
        avg(computation_time_ms) as computation_time_ms,
        avg(exposed_comm_time_ms) as exposed_comm_time_ms,
        avg(exposed_memcpy_time_ms) as exposed_memcpy_time_ms,
        avg(idle_time_ms) as idle_time_ms,
        count(distinct (group_key, run_index)) as run_count,
        count(*) as trace_count
    from sides
    group by model, group_platform, mode
)

select * from final
