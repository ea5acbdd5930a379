{#- One row per trace with GPU events: HTA's per-rank time breakdown (get_temporal_breakdown) and its
    communication/computation overlap (get_comm_comp_overlap), over every GPU event of the trace as
    HTA reads it (linked to a launch or not). HTA's kernel classes: communication is a name starting
    with `nccl` in any case, or a kernel TraceLake's taxonomy marks a collective (RCCL, custom
    all-reduce); memory is a copy or a fill (`Memcpy` / `Memset` in the name, or a copy/fill event);
    computation is the rest. Each class is merged into disjoint intervals; the overlap is
    |comm ∩ comp| = |comm| + |comp| - |comm ∪ comp|, so no interval pairs are joined. -#}
with kernels as (
    select * from {{ ref('kernels') }}
),

classified_events as (
    select
        trace_id,
        ts_us as start_us,
        end_us,
        dur_us,
        case
            when is_comm or {{ regex_search('name', "'(?i)^nccl'") }} then 'communication'
            when category in ('gpu_memcpy', 'gpu_memset') or gpu_bucket = 'memcpy'
                or name like '%Memcpy%' or name like '%Memset%' then 'memory'
            else 'computation'
        end as hta_kernel_class
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
        ('memory', 'memory'),
        ('memory', 'all')
    ) as membership (hta_kernel_class, interval_set)
),

set_intervals as (
    select
        classified_events.trace_id,
        set_membership.interval_set,
        classified_events.start_us,
        classified_events.end_us
    from classified_events
    inner join set_membership on classified_events.hta_kernel_class = set_membership.hta_kernel_class
),

merged_intervals as (
    {{ merge_intervals('set_intervals', ['trace_id', 'interval_set']) }}
),

set_lengths as (
    select
        trace_id,
        coalesce(sum(merged_end_us - merged_start_us) filter (where interval_set = 'computation'), 0) as computation_us,
        coalesce(sum(merged_end_us - merged_start_us) filter (where interval_set = 'communication'), 0) as communication_us,
        coalesce(sum(merged_end_us - merged_start_us) filter (where interval_set = 'memory'), 0) as memory_us,
        coalesce(sum(merged_end_us - merged_start_us) filter (where interval_set = 'compute_or_comm'), 0) as compute_or_comm_us,
        sum(merged_end_us - merged_start_us) filter (where interval_set = 'all') as busy_us,
        min(merged_start_us) filter (where interval_set = 'all') as first_start_us,
        max(merged_end_us) filter (where interval_set = 'all') as last_end_us
    from merged_intervals
    group by trace_id
),

event_counts as (
    select
        trace_id,
        count(*) as gpu_event_count,
        count(*) filter (where hta_kernel_class = 'communication') as comm_event_count,
        sum(dur_us) as kernel_sum_us
    from classified_events
    group by trace_id
),

final as (
    select
        set_lengths.trace_id,
        set_lengths.first_start_us,
        set_lengths.last_end_us,
        set_lengths.last_end_us - set_lengths.first_start_us as span_us,
        set_lengths.busy_us,
        event_counts.kernel_sum_us,
        event_counts.gpu_event_count,
        event_counts.comm_event_count,
        set_lengths.computation_us,
        set_lengths.communication_us,
        set_lengths.memory_us,
        set_lengths.communication_us + set_lengths.computation_us - set_lengths.compute_or_comm_us
            as comm_comp_overlap_us,
        100.0 * (set_lengths.communication_us + set_lengths.computation_us - set_lengths.compute_or_comm_us)
            / nullif(set_lengths.communication_us, 0) as comm_comp_overlap_percent,
        set_lengths.compute_or_comm_us - set_lengths.computation_us as exposed_comm_us,
        set_lengths.busy_us - set_lengths.computation_us as non_compute_us,
        set_lengths.last_end_us - set_lengths.first_start_us - set_lengths.busy_us as idle_us
    from set_lengths
    inner join event_counts on set_lengths.trace_id = event_counts.trace_id
)

select * from final
