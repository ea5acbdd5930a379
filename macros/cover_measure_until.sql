{#- For each row of `points`: how much of the disjoint intervals `cover` lies before the instant
    in `time_column`, as column `alias` (µs). `cover` has trace_id, `interval_set`, merged_start_us,
    merged_end_us and covered_before_us (int_gpu_intervals_accumulated); each point row names the
    set it is measured against in its own `interval_set` column (no match: 0). The covered length
    of a span [a, b) is then measure(b) - measure(a). DuckDB: an ASOF join, one sorted pass. -#}
{% macro cover_measure_until(points, time_column, cover, alias) -%}
    {{ return(adapter.dispatch('cover_measure_until', 'tracelake')(points, time_column, cover, alias)) }}
{%- endmacro %}

{% macro duckdb__cover_measure_until(points, time_column, cover, alias) -%}
    select
        points.*,
        coalesce(
            cover.covered_before_us
                + least(points.{{ time_column }}, cover.merged_end_us) - cover.merged_start_us,
            0
        ) as {{ alias }}
    from {{ points }} as points
    asof left join {{ cover }} as cover
        on points.trace_id = cover.trace_id
        and points.interval_set = cover.interval_set
        and points.{{ time_column }} >= cover.merged_start_us
{%- endmacro %}
