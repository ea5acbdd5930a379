{#- The integers of a list written as text ('[0, 1, ..., 63]', '[]', or a JSON list), in order,
    as BIGINT[] ('...' and any other text ignored); NULL when the text is NULL. -#}
{% macro int_list_text(column) -%}
    {{ return(adapter.dispatch('int_list_text', 'tracelake')(column)) }}
{%- endmacro %}
{% macro duckdb__int_list_text(column) -%}
    list_transform(regexp_extract_all({{ column }}, '-?[0-9]+'), lambda x: x::bigint)
{%- endmacro %}

{#- A field of a JSON args text as text (strings unquoted, numbers and lists as written). -#}
{% macro json_field_text(column, field) -%}
    {{ return(adapter.dispatch('json_field_text', 'tracelake')(column, field)) }}
{%- endmacro %}
{% macro duckdb__json_field_text(column, field) -%}
    json_extract_string({{ column }}, '$."{{ field }}"')
{%- endmacro %}

{#- The collective fields PyTorch c10d records (on `record_param_comms`, copied by Kineto onto the
    collective kernel), parsed from a JSON args column; every field NULL when the args lack it. -#}
{% macro collective_arg_columns(args) -%}
        lower({{ json_field_text(args, 'Collective name') }}) as collective_name_raw,
        {{ json_field_text(args, 'dtype') }} as dtype,
        try_cast({{ json_field_text(args, 'In msg nelems') }} as bigint) as in_nelems,
        try_cast({{ json_field_text(args, 'Out msg nelems') }} as bigint) as out_nelems,
        try_cast({{ json_field_text(args, 'Group size') }} as bigint) as group_size,
        {{ json_field_text(args, 'Process Group Name') }} as pg_name,
        {{ json_field_text(args, 'Process Group Description') }} as pg_desc,
        {{ json_field_text(args, 'Process Group Ranks') }} as pg_ranks_text,
        {{ json_field_text(args, 'In split size') }} as in_split_text,
        {{ json_field_text(args, 'Out split size') }} as out_split_text,
        try_cast({{ json_field_text(args, 'Seq') }} as bigint) as seq,
        {{ json_field_text(args, 'Comms Id') }} as comms_id,
        try_cast({{ json_field_text(args, 'Global rank start') }} as bigint) as global_rank_start,
        try_cast({{ json_field_text(args, 'Global rank stride') }} as bigint) as global_rank_stride
{%- endmacro %}
