

with kernels as (
    select trace_id, event_idx, gpu_bucket, ts_us, dur_us, end_us
    from "warehouse"."main"."kernels"
    where is_linked and trace_id in ('@@NEW_TRACE_IDS@@')
),

accumulated_intervals as (
    select * from "warehouse"."intermediate"."int_gpu_intervals_accumulated"
    where event_scope = 'linked' and trace_id in ('@@NEW_TRACE_IDS@@')
),

hiding_sets as (
    select * from (values
        ('communication', 'computation'),
        ('memcpy', 'compute_or_comm')
    ) as hiding (gpu_bucket, interval_set)
),

covered_until as (select
        *,
        max(end_us) over (
            partition by trace_id, gpu_bucket
            order by ts_us, end_us, event_idx
            rows between unbounded preceding and 1 preceding
        ) as bucket_covered_until_us
    from kernels
),

exclusive_spans as (
    select
        covered_until.trace_id,
        covered_until.event_idx,
        covered_until.gpu_bucket,
        covered_until.ts_us,
        covered_until.dur_us,
        covered_until.end_us,
        least(greatest(covered_until.ts_us, coalesce(covered_until.bucket_covered_until_us, covered_until.ts_us)),
              covered_until.end_us) as exclusive_start_us,
        coalesce(hiding_sets.interval_set, 'none') as interval_set
    from covered_until
    left join hiding_sets on covered_until.gpu_bucket = hiding_sets.gpu_bucket
),

hidden_before_start as (
    select
        points.*,
        coalesce(
            last_intervals.covered_before_us
                + least(points.exclusive_start_us, last_intervals.merged_end_us) - last_intervals.merged_start_us,
            0
        ) as hidden_before_start_us
    from exclusive_spans as points
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
                from accumulated_intervals
                union all
                select
                    trace_id, interval_set, exclusive_start_us as at_us, 1 as is_point,
                    event_idx as point_key, cast(null as double), cast(null as double), cast(null as double)
                from exclusive_spans
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
        and points.event_idx = last_intervals.point_key
),

hidden_before_end as (
    select
        points.*,
        coalesce(
            last_intervals.covered_before_us
                + least(points.end_us, last_intervals.merged_end_us) - last_intervals.merged_start_us,
            0
        ) as hidden_before_end_us
    from hidden_before_start as points
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
                from accumulated_intervals
                union all
                select
                    trace_id, interval_set, end_us as at_us, 1 as is_point,
                    event_idx as point_key, cast(null as double), cast(null as double), cast(null as double)
                from hidden_before_start
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
        and points.event_idx = last_intervals.point_key
),

final as (
    select
        trace_id || ':' || event_idx as kernel_key,
        trace_id,
        event_idx,
        gpu_bucket,
        ts_us,
        dur_us,
        end_us - exclusive_start_us as exclusive_us,
        hidden_before_end_us - hidden_before_start_us as hidden_us,
        greatest(end_us - exclusive_start_us - (hidden_before_end_us - hidden_before_start_us), 0) as exposed_us
    from hidden_before_end
)

select * from final
