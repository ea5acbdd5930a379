{#- The op_perf rows of some op categories, on each trace's own platform (the per-category views). -#}
{% macro op_perf_for_categories(categories) -%}
with op_perf as (
    select * from {{ ref('op_perf') }}
),

final as (
    select *
    from op_perf
    where is_trace_platform and op_category in ({% for c in categories %}'{{ c }}'{{ ', ' if not loop.last }}{% endfor %})
)

select * from final
{%- endmacro %}
