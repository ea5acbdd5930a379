{#- A sort key that orders text naturally: runs of digits compare as numbers (r2 before r10), the
    rest case-insensitively, a digit run before text at the same place. A list of structs
    (is_text, digit count without leading zeros, text), compared element by element. -#}
{% macro natural_sort_key(column) -%}
    {{ return(adapter.dispatch('natural_sort_key', 'tracelake')(column)) }}
{%- endmacro %}

{% macro duckdb__natural_sort_key(column) -%}
    list_transform(
        regexp_extract_all({{ column }}, '\d+|\D+'),
        lambda part: case
            when regexp_full_match(part, '\d+')
                then {'is_text': false, 'digit_count': length(ltrim(part, '0')), 'text': ltrim(part, '0')}
            else {'is_text': true, 'digit_count': 0, 'text': lower(part)}
        end
    )
{%- endmacro %}

{#- The folder of a file path ('.' for a bare file name): two paths share it when their files sit together. -#}
{% macro parent_folder(column) -%}
    {{ return(adapter.dispatch('parent_folder', 'tracelake')(column)) }}
{%- endmacro %}

{% macro duckdb__parent_folder(column) -%}
    case when contains({{ column }}, '/') then regexp_replace({{ column }}, '/[^/]*$', '') else '.' end
{%- endmacro %}
