{#- True when the regex `pattern_sql` (a SQL expression: a quoted literal or a column) occurs
    anywhere in `column` (search, not full match). -#}
{% macro regex_search(column, pattern_sql) -%}
    {{ return(adapter.dispatch('regex_search', 'tracelake')(column, pattern_sql)) }}
{%- endmacro %}

{% macro default__regex_search(column, pattern_sql) -%}
    regexp_like({{ column }}, {{ pattern_sql }})
{%- endmacro %}

{% macro duckdb__regex_search(column, pattern_sql) -%}
    regexp_matches({{ column }}, {{ pattern_sql }})
{%- endmacro %}

{% macro spark__regex_search(column, pattern_sql) -%}
    ({{ column }} rlike {{ pattern_sql }})
{%- endmacro %}
