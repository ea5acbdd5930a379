with kernels as (
    select * from "warehouse"."main"."kernels"
    where is_linked
),

launch_calls as (
    select trace_id, event_idx, name, ts_us, end_us from "warehouse"."staging"."stg_trace__host_ops"
    where category in ('cuda_runtime', 'cuda_driver')
),

final as (
    select
        kernels.trace_id,
        kernels.event_idx,
        kernels.ts_us,
        kernels.end_us,
        kernels.dur_us,
        kernels.is_graph_launch,
        launch_calls.event_idx as launch_event_idx,
        launch_calls.name as launch_name,
        launch_calls.ts_us as launch_ts_us,
        launch_calls.end_us as launch_end_us
    from kernels
    inner join launch_calls
        on kernels.trace_id = launch_calls.trace_id
        and coalesce(kernels.graph_launch_event_idx, kernels.launch_event_idx) = launch_calls.event_idx
)

select * from final
