{#- The union of [start_us, end_us) intervals per group, as disjoint merged intervals.
    `intervals` names a relation/CTE with `start_us`, `end_us` and the `group_by` columns.
    Intervals are sorted by start; one that starts at or before the running end of the
    earlier ones joins their interval (touching intervals merge, as in TraceLens).
    Returns the group columns, `merged_start_us` and `merged_end_us`. -#}
{% macro merge_intervals(intervals, group_by) -%}
    {%- set keys = group_by | join(', ') -%}
    select
        {{ keys }},
        min(start_us) as merged_start_us,
        max(end_us) as merged_end_us
    from (
        select
            *,
            sum(starts_group) over (
                partition by {{ keys }}
                order by start_us, end_us
                rows between unbounded preceding and current row
            ) as merged_group_id
        from (
            select
                *,
                case
                    when max(end_us) over (
                        partition by {{ keys }}
                        order by start_us, end_us
                        rows between unbounded preceding and 1 preceding
                    ) >= start_us then 0
                    else 1
                end as starts_group
            from {{ intervals }}
        ) as flagged
    ) as grouped
    group by {{ keys }}, merged_group_id
{%- endmacro %}
