{#- The op_perf rows of the op categories one agent owns (the agent_categories seed), on each
    trace's own platform (the per-category views). -#}
{% macro op_perf_for_agent(agent) -%}
with op_perf as (
    select * from {{ ref('op_perf') }}
),

owned_categories as (
    select category from {{ ref('agent_categories') }}
    where category_kind = 'op' and agent = '{{ agent }}'
),

final as (
    select *
    from op_perf
    where is_trace_platform and op_category in (select category from owned_categories)
)

select * from final
{%- endmacro %}
