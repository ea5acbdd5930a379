{#- Per trace, device and copy kind, memcpy_bandwidth_series summarized: HTA's
    get_memory_bw_summary statistics over the series' rows with bandwidth above zero, and the
    time-weighted mean bandwidth while a copy of the kind ran. A view. -#}
{{ config(materialized='view') }}

with series as (
    select * from {{ ref('memcpy_bandwidth_series') }}
),

final as (
    select
        trace_id,
        device,
        copy_kind,
        count(*) filter (where bandwidth_change > 0) as copy_count,
        count(*) filter (where gb_per_s > 0) as point_count,
        avg(gb_per_s) filter (where gb_per_s > 0) as mean_gb_per_s,
        stddev_samp(gb_per_s) filter (where gb_per_s > 0) as std_gb_per_s,
        min(gb_per_s) filter (where gb_per_s > 0) as min_gb_per_s,
        quantile_cont(gb_per_s, 0.25) filter (where gb_per_s > 0) as p25_gb_per_s,
        quantile_cont(gb_per_s, 0.5) filter (where gb_per_s > 0) as median_gb_per_s,
        quantile_cont(gb_per_s, 0.75) filter (where gb_per_s > 0) as p75_gb_per_s,
        max(gb_per_s) as max_gb_per_s,
        coalesce(sum(held_us) filter (where gb_per_s > 0), 0) as active_us,
        sum(gb_per_s * held_us) filter (where gb_per_s > 0)
            / nullif(sum(held_us) filter (where gb_per_s > 0), 0) as active_mean_gb_per_s
    from series
    group by trace_id, device, copy_kind
)

select * from final
