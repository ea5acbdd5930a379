{#- True when `pattern` occurs anywhere in `column` (search, not full match). -#}
{% macro regex_search(column, pattern) -%}
    {{ return(adapter.dispatch('regex_search', 'tracelake')(column, pattern)) }}
{%- endmacro %}

{% macro default__regex_search(column, pattern) -%}
    regexp_like({{ column }}, '{{ pattern }}')
{%- endmacro %}

{% macro duckdb__regex_search(column, pattern) -%}
    regexp_matches({{ column }}, '{{ pattern }}')
{%- endmacro %}

{% macro spark__regex_search(column, pattern) -%}
    ({{ column }} rlike '{{ pattern }}')
{%- endmacro %}
