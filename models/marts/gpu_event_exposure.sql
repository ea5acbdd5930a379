{#- One row per GPU event linked to a host launch: the part of its time that is its own on the
    timeline (no earlier-starting event of its bucket already covers it) and the part of that
    left exposed by the buckets that hide it (communication under computation, memcpy under
    computation or communication). Each microsecond of a bucket's union belongs to exactly one
    event, so per trace these add up to gpu_timeline's computation, total and exposed times. -#}
{{ config(materialized='incremental') }}

with kernels as (
    select trace_id, event_idx, gpu_bucket, ts_us, dur_us, end_us
    from {{ ref('kernels') }}
    where is_linked and {{ is_new_trace() }}
),

accumulated_intervals as (
    select * from {{ ref('int_gpu_intervals_accumulated') }}
    where event_scope = 'linked' and {{ is_new_trace() }}
),

hiding_sets as (
    select * from (values
        ('communication', 'computation'),
        ('memcpy', 'compute_or_comm')
    ) as hiding (gpu_bucket, interval_set)
),

covered_until as (
    {#- the end of the bucket's union so far: the running end of every earlier-starting event -#}
    select
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
    {{ cover_measure_until('exclusive_spans', 'exclusive_start_us', 'accumulated_intervals', 'hidden_before_start_us') }}
),

hidden_before_end as (
    {{ cover_measure_until('hidden_before_start', 'end_us', 'accumulated_intervals', 'hidden_before_end_us') }}
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
