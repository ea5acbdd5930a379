{#- The gpu_timeline columns (ms, and percent of total time) from a breakdown row in µs. -#}
{% macro gpu_timeline_columns(relation) -%}
    {%- set metrics = ['computation', 'exposed_comm', 'exposed_memcpy', 'busy', 'idle', 'total', 'total_comm', 'total_memcpy'] -%}
    {%- for metric in metrics %}
        {{ relation }}.{{ metric }}_us / 1000.0 as {{ metric }}_time_ms,
    {%- endfor %}
    {%- for metric in metrics %}
        case
            when {{ relation }}.total_us > 0 then 100.0 * {{ relation }}.{{ metric }}_us / {{ relation }}.total_us
        end as {{ metric }}_time_percent{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}
