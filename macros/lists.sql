{#- List helpers over the JSON argument columns. DuckDB-specific functions live here only
    (adapter.dispatch), so another engine needs just these macros. -#}

{#- '[[1, 2], [3], []]' -> BIGINT[][] (NULL when the text holds nested tensor lists). -#}
{% macro json_shapes(column) -%}
    {{ return(adapter.dispatch('json_shapes', 'tracelake')(column)) }}
{%- endmacro %}
{% macro duckdb__json_shapes(column) -%}
    try(from_json({{ column }}, '[["BIGINT"]]'))
{%- endmacro %}

{#- '["c10::BFloat16", ""]' -> VARCHAR[] -#}
{% macro json_strings(column) -%}
    {{ return(adapter.dispatch('json_strings', 'tracelake')(column)) }}
{%- endmacro %}
{% macro duckdb__json_strings(column) -%}
    try(from_json({{ column }}, '["VARCHAR"]'))
{%- endmacro %}

{#- '[1, 1]' (a Concrete Inputs entry) -> BIGINT[]; NULL when it is not an int list. -#}
{% macro json_ints(column) -%}
    {{ return(adapter.dispatch('json_ints', 'tracelake')(column)) }}
{%- endmacro %}
{% macro duckdb__json_ints(column) -%}
    try(from_json({{ column }}, '["BIGINT"]'))
{%- endmacro %}

{#- Product of an integer list; 1 for an empty list (a scalar). -#}
{% macro list_prod(list_expression) -%}
    {{ return(adapter.dispatch('list_prod', 'tracelake')(list_expression)) }}
{%- endmacro %}
{% macro duckdb__list_prod(list_expression) -%}
    list_reduce(list_prepend(1::bigint, {{ list_expression }}), lambda a, b: a * b)
{%- endmacro %}

{#- A JSON object text from (key, SQL expression) pairs, e.g. the perf-model parameters. -#}
{% macro json_object_of(pairs) -%}
    {{ return(adapter.dispatch('json_object_of', 'tracelake')(pairs)) }}
{%- endmacro %}
{% macro duckdb__json_object_of(pairs) -%}
    to_json(struct_pack({% for key, expression in pairs %}"{{ key }}" := {{ expression }}{{ ', ' if not loop.last }}{% endfor %}))::varchar
{%- endmacro %}

{#- JSON text in one canonical, compact form (traces may pretty-print their args). -#}
{% macro json_compact(column) -%}
    {{ return(adapter.dispatch('json_compact', 'tracelake')(column)) }}
{%- endmacro %}
{% macro duckdb__json_compact(column) -%}
    try(json({{ column }})::varchar)
{%- endmacro %}

{#- The last element of a list (NULL for an empty or NULL list). -#}
{% macro list_last(list_expression) -%}
    {{ return(adapter.dispatch('list_last', 'tracelake')(list_expression)) }}
{%- endmacro %}
{% macro default__list_last(list_expression) -%}
    element_at({{ list_expression }}, -1)
{%- endmacro %}
{% macro duckdb__list_last(list_expression) -%}
    list_extract({{ list_expression }}, -1)
{%- endmacro %}
