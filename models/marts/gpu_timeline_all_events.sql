{#- One row per trace: TraceLens' gpu_timeline over all GPU events, linked or not (TraceLens --include_unlinked_kernels). -#}
{{ config(materialized='incremental') }}

with breakdown as (
    select * from {{ ref('int_gpu_time_breakdown') }}
    where event_scope = 'all_events' and {{ is_new_trace() }}
),

final as (
    select
        breakdown.trace_id,
        {{ gpu_timeline_columns('breakdown') }}
    from breakdown
)

select * from final
