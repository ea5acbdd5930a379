{#- Tree walks over int_cpu_op_ancestors for a CTE of candidate ops (columns trace_id, op_id). -#}

{#- Each candidate paired with every op in its subtree (itself at distance 0). -#}
{% macro candidate_subtrees(ancestors, candidates) -%}
    select {{ ancestors }}.trace_id, {{ ancestors }}.op_id, {{ ancestors }}.ancestor_op_id, {{ ancestors }}.distance
    from {{ ancestors }}
    inner join {{ candidates }}
        on {{ ancestors }}.trace_id = {{ candidates }}.trace_id
        and {{ ancestors }}.ancestor_op_id = {{ candidates }}.op_id
{%- endmacro %}

{#- The candidates with no other candidate above them; `subtrees` is candidate_subtrees() of them. -#}
{% macro outermost_candidates(candidates, subtrees) -%}
    select {{ candidates }}.trace_id, {{ candidates }}.op_id
    from {{ candidates }}
    where not exists (
        select 1 from {{ subtrees }}
        where {{ subtrees }}.trace_id = {{ candidates }}.trace_id
            and {{ subtrees }}.op_id = {{ candidates }}.op_id
            and {{ subtrees }}.distance > 0
    )
{%- endmacro %}
