{#- The text of capture group `group` of the regex `pattern_sql` (a quoted literal) in `column`;
    empty when the pattern does not match. -#}
{% macro regex_extract(column, pattern_sql, group) -%}
    {{ return(adapter.dispatch('regex_extract', 'tracelake')(column, pattern_sql, group)) }}
{%- endmacro %}

{% macro default__regex_extract(column, pattern_sql, group) -%}
    regexp_extract({{ column }}, {{ pattern_sql }}, {{ group }})
{%- endmacro %}
