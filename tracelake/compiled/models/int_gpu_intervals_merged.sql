with kernels as (
    select * from "warehouse"."main"."kernels"
),

scoped_events as (
    select trace_id, 'linked' as event_scope, gpu_bucket, ts_us, end_us
    from kernels
    where is_linked
    union all
    select trace_id, 'all_events' as event_scope, gpu_bucket, ts_us, end_us
    from kernels
),

set_membership as (
    select * from (values
        ('computation', 'computation'),
        ('computation', 'compute_or_comm'),
        ('computation', 'all'),
        ('communication', 'communication'),
        ('communication', 'compute_or_comm'),
        ('communication', 'all'),
        ('memcpy', 'memcpy'),
        ('memcpy', 'all')
    ) as membership (gpu_bucket, interval_set)
),

intervals as (
    select
        scoped_events.trace_id,
        scoped_events.event_scope,
        set_membership.interval_set,
        scoped_events.ts_us as start_us,
        scoped_events.end_us
    from scoped_events
    inner join set_membership on scoped_events.gpu_bucket = set_membership.gpu_bucket
),

merged_intervals as (
    select
        trace_id, event_scope, interval_set,
        min(start_us) as merged_start_us,
        max(end_us) as merged_end_us
    from (
        select
            *,
            sum(starts_group) over (
                partition by trace_id, event_scope, interval_set
                order by start_us, end_us
                rows between unbounded preceding and current row
            ) as merged_group_id
        from (
            select
                *,
                case
                    when max(end_us) over (
                        partition by trace_id, event_scope, interval_set
                        order by start_us, end_us
                        rows between unbounded preceding and 1 preceding
                    ) >= start_us then 0
                    else 1
                end as starts_group
            from intervals
        ) as flagged
    ) as grouped
    group by trace_id, event_scope, interval_set, merged_group_id
)

select * from merged_intervals
