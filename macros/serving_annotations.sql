{#- The integer after `key=` in a bracketed step annotation (SGLang `step[...]`, ATOM
    `prefill[...]`): the first integer, so `bs=117/128` (CUDA-graph padding) is 117; null when
    the key is absent. The key must follow `[` or a space, so `sq=` does not match `c_sqsq=`. -#}
{% macro annotation_field(column, key) -%}
    cast(nullif({{ regex_extract(column, "'[\\[ ]" ~ key ~ "=([0-9]+)'", 1) }}, '') as bigint)
{%- endmacro %}

{#- Capture group `group` of `pattern_sql` in `column` as a bigint; null when it does not match. -#}
{% macro regex_int(column, pattern_sql, group) -%}
    cast(nullif({{ regex_extract(column, pattern_sql, group) }}, '') as bigint)
{%- endmacro %}
