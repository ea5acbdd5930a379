{#- The columns that make an op signature (TraceLens' unified perf summary groups by them). -#}
{% macro op_signature_columns() -%}
    {{ return(['name', 'op_category', 'process_name', 'process_label', 'thread_name',
               'input_dims', 'input_type', 'input_strides', 'concrete_inputs']) }}
{%- endmacro %}

{#- op_perf.signature_key of a row whose signature columns are already coalesced to ''. -#}
{% macro op_signature_key(trace_id, platform, columns) -%}
    {{ trace_id }} || ':' || {{ platform }} || ':' || md5({% for column in columns %}{{ column }}{{ " || '|' || " if not loop.last }}{% endfor %})
{%- endmacro %}
