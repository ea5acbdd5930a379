{#- What the host ran at either end of its host-work gaps (gap_class host_work), per trace, side and
    frame: the data-loading frame when the host was fetching a batch, else the innermost python
    frame, else cpu op, of the launching thread when the GPU went idle
    (`gap start`) and when it launched again (`gap end`). Ends with no frame recorded are left out. A view. -#}
{{ config(materialized='view') }}

with gaps as (
    select * from {{ ref('int_gpu_idle_gaps_host_context') }}
    where gap_class = 'host_work'
),

frames as (
    select trace_id, 'gap start' as side, start_frame as name, start_is_data_loading as is_data_loading, gap_us from gaps
    union all
    select trace_id, 'gap end' as side, end_frame as name, end_is_data_loading as is_data_loading, gap_us from gaps
),

final as (
    select
        trace_id,
        side,
        name,
        bool_or(is_data_loading) as is_data_loading,
        count(*) as gap_count,
        sum(gap_us) / 1000 as gap_time_ms
    from frames
    where name is not null
    group by trace_id, side, name
)

select * from final
