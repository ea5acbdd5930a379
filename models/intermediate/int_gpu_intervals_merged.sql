{#- Interval unions of GPU busy time, per trace, event scope and interval set.
    Scopes: `linked` (TraceLens default: GPU events linked to a host launch) and `all_events`.
    Sets: computation, communication, memcpy, compute_or_comm and all; the timeline's
    differences follow from unions: |COMM \ COMP| = |COMM u COMP| - |COMP|, and
    |(MEMCPY \ COMP) \ COMM| = |ALL| - |COMP u COMM|. Touching intervals merge. -#}
with kernels as (
    select * from {{ ref('kernels') }}
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
    {{ merge_intervals('intervals', ['trace_id', 'event_scope', 'interval_set']) }}
)

select * from merged_intervals
