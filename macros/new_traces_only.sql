{#- A predicate selecting the traces a model still has to process.
    - `new_trace_ids` var set (the ingest fast path fills it in): exactly those ids, as a
      constant list, so DuckDB prunes the Hive partitions of every other trace.
    - incremental dbt run: traces this model has not seen yet. Traces are immutable (a changed
      file is a new trace_id), so appending new traces is the whole update.
    - full build: every trace. -#}
{% macro is_new_trace(trace_id_column='trace_id') -%}
    {%- set new_ids = var('new_trace_ids', none) -%}
    {%- if new_ids is not none and is_incremental() -%}
    {{ trace_id_column }} in ({% for trace_id in new_ids %}'{{ trace_id }}'{{ ', ' if not loop.last }}{% endfor %})
    {%- elif is_incremental() -%}
    {{ trace_id_column }} not in (select trace_id from {{ this }})
    {%- else -%}
    true
    {%- endif -%}
{%- endmacro %}
