{#- The kernel_taxonomy rule a kernel name takes, as one CASE over literal patterns read from
    the seed at compile time. Literal patterns compile once per query; joining names to the
    rules table instead compiles a regex per (name, rule) pair. The seed is part of the
    project fingerprint, so editing it recompiles this. -#}
{% macro kernel_rule_case(name_column) -%}
    {%- if execute -%}
        {%- set rules = run_query("select rule_order, pattern from " ~ ref('kernel_taxonomy') ~ " order by rule_order") -%}
    case
        {%- for rule in rules.rows %}
        when {{ regex_search(name_column, "'" ~ (rule[1] | replace("'", "''")) ~ "'") }} then {{ rule[0] }}
        {%- endfor %}
    end
    {%- else -%}
    null::integer
    {%- endif -%}
{%- endmacro %}
