{#- For each row of `points` (unique by trace_id and `point_key`): how much of the disjoint
    intervals `cover` lies before the instant in `time_column`, as column `alias` (µs). `cover`
    has trace_id, interval_set, merged_start_us, merged_end_us and covered_before_us
    (int_gpu_intervals_accumulated); each point names the set it is measured against in its own
    `interval_set` column (no match: 0). The covered length of a span [a, b) is then
    measure(b) - measure(a). Points and interval starts are sorted together and each point takes
    the last interval started at or before it (a window, one sort: no range join, and no ASOF join
    that the planner may turn into a nested loop on a low row estimate). -#}
{% macro cover_measure_until(points, time_column, cover, alias, point_key='event_idx') -%}
    select
        points.*,
        coalesce(
            last_intervals.covered_before_us
                + least(points.{{ time_column }}, last_intervals.merged_end_us) - last_intervals.merged_start_us,
            0
        ) as {{ alias }}
    from {{ points }} as points
    left join (
        select trace_id, point_key, merged_start_us, merged_end_us, covered_before_us
        from (
            select
                trace_id,
                point_key,
                is_point,
                last_value(merged_start_us ignore nulls) over sorted_instants as merged_start_us,
                last_value(merged_end_us ignore nulls) over sorted_instants as merged_end_us,
                last_value(covered_before_us ignore nulls) over sorted_instants as covered_before_us
            from (
                select
                    trace_id, interval_set, merged_start_us as at_us, 0 as is_point,
                    cast(null as bigint) as point_key, merged_start_us, merged_end_us, covered_before_us
                from {{ cover }}
                union all
                select
                    trace_id, interval_set, {{ time_column }} as at_us, 1 as is_point,
                    {{ point_key }} as point_key, cast(null as double), cast(null as double), cast(null as double)
                from {{ points }}
            ) as instants
            window sorted_instants as (
                partition by trace_id, interval_set
                order by at_us, is_point
                rows between unbounded preceding and current row
            )
        ) as looked_up
        where is_point = 1
    ) as last_intervals
        on points.trace_id = last_intervals.trace_id
        and points.{{ point_key }} = last_intervals.point_key
{%- endmacro %}
