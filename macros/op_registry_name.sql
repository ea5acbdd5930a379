{#- An op's name as the models know it (stg_trace__host_ops): SGLang's profiler wrappers carry
    a per-call-site suffix (`sglang_profiler::attention_paged_attention_ragged_100`), which
    TraceLens' pseudo-op registry strips too (reference tracelens_core.md §3.5). -#}
{% macro op_registry_name(name) -%}
    case
        when {{ name }} like 'sglang_profiler::%' then {{ regex_replace(name, "'_[0-9]+$'", "''") }}
        else {{ name }}
    end
{%- endmacro %}

{% macro regex_replace(column, pattern_sql, replacement_sql) -%}
    {{ return(adapter.dispatch('regex_replace', 'tracelake')(column, pattern_sql, replacement_sql)) }}
{%- endmacro %}

{% macro default__regex_replace(column, pattern_sql, replacement_sql) -%}
    regexp_replace({{ column }}, {{ pattern_sql }}, {{ replacement_sql }})
{%- endmacro %}
