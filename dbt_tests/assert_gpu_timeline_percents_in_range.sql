{#- gpu_timeline: every *_time_percent column lies in [0, 100], with 1e-9 float tolerance on
    both ends (null, for a zero-length timeline, is allowed). Returns one row per violation. -#}
{%- set metrics = ['computation', 'exposed_comm', 'exposed_memcpy', 'busy', 'idle', 'total', 'total_comm', 'total_memcpy'] %}

with timeline as (
    select * from {{ ref('gpu_timeline') }}
),

percents as (
    {%- for metric in metrics %}
    select trace_id, '{{ metric }}_time_percent' as column_name, {{ metric }}_time_percent as percent_value
    from timeline
    {{- "\n    union all" if not loop.last }}
    {%- endfor %}
)

select *
from percents
where percent_value < -1e-9
    or percent_value > 100 + 1e-9
