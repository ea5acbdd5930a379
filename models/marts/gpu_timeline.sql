{#- One row per trace: TraceLens' gpu_timeline over GPU events linked to a host launch (TraceLens default). -#}
{{ config(materialized='incremental') }}

with breakdown as (
    select * from {{ ref('int_gpu_time_breakdown') }}
    where event_scope = 'linked' and {{ is_new_trace() }}
),

final as (
    select
        breakdown.trace_id,
        {{ gpu_timeline_columns('breakdown') }}
    from breakdown
)

select * from final
