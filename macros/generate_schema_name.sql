{#- Use the folder's schema name as-is (staging, intermediate); marts go to the default schema
    so users query plain names: `select * from gpu_timeline`. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}{{ target.schema }}{%- else -%}{{ custom_schema_name | trim }}{%- endif -%}
{%- endmacro %}
