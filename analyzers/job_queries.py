"""The queries of the job findings, over the job marts (docs/jobs.md). Each finding runs its query
and prints it, with the job id in place of its one `?`, as its evidence_sql: the numbers the
finding states are the columns that query returns, so the reader reproduces them by running it.

Every query starts from `params` (the job id) and ends in one row per thing the finding names.
The job's step time is the longest of its ranks' E2E as their own reports give it (jobs.step_time_us):
the job runs as long as its slowest rank, and every "% of the job's step time" divides by it.
"""

from __future__ import annotations

# The job's header: ranks present and missing, nodes, platforms, clock method and uncertainty,
# the step time.
JOB_SQL = """
with params as (select ?::varchar as job_id)
select j.job_id, j.world_size, j.rank_count, j.missing_ranks, j.node_count, j.platforms, j.clock_method,
    j.clock_uncertainty_us, j.step_time_us as job_step_us
from jobs as j
cross join params
where j.job_id = params.job_id"""

# The straggler: the rank last at the most implicit-sync collectives (fewest total wait on a tie;
# the collectives job_straggler_summary counts: implicit-sync or unnamed stream-ordered, no desync),
# what the other ranks wait for it (per collective it arrives last at, the mean wait of the others,
# summed) and what the step would gain if it alone arrived on time: per such collective, its lead
# over the next-latest rank (the smallest wait of the others: the collective then starts when that
# rank arrives), summed; capped by the others' mean exposed communication (waiting under
# computation costs nothing).
STRAGGLER_SQL = """
with params as (select ?::varchar as job_id),
straggler as (
    select s.job_id, s.rank, s.node_id, s.times_arrived_last, s.num_collectives, s.pct_arrived_last,
        s.total_wait_us
    from job_straggler_summary as s
    cross join params
    where s.job_id = params.job_id
    order by s.times_arrived_last desc, s.total_wait_us, s.rank
    limit 1
),
runner_up as (
    select max(s.times_arrived_last) as times_arrived_last
    from job_straggler_summary as s
    inner join straggler on s.job_id = straggler.job_id and s.rank <> straggler.rank
),
late_collectives as (
    select i.instance_id
    from collective_instances as i
    inner join straggler on i.job_id = straggler.job_id and i.last_arrival_rank = straggler.rank
    where not i.is_desync
        and (i.collective_kind = 'implicit_sync' or (i.match_method = 'stream_ordinal' and i.collective_name = 'unknown'))
),
others_wait as (
    select c.instance_id, avg(c.wait_us) as mean_wait_of_others_us, min(c.wait_us) as lead_over_next_us
    from collective_calls as c
    inner join straggler on c.job_id = straggler.job_id and c.rank <> straggler.rank
    inner join late_collectives as l on l.instance_id = c.instance_id
    group by c.instance_id
),
others_exposed as (
    select avg(b.exposed_comm_us) as others_exposed_comm_us
    from job_rank_breakdown as b
    inner join straggler on b.job_id = straggler.job_id and b.rank <> straggler.rank
),
job_step as (
    select j.step_time_us as job_step_us
    from jobs as j
    inner join straggler on j.job_id = straggler.job_id
),
lost as (
    select count(*) as late_collectives, coalesce(sum(mean_wait_of_others_us), 0) as others_wait_us,
        coalesce(sum(lead_over_next_us), 0) as lead_over_next_us
    from others_wait
)
select straggler.rank, straggler.node_id, straggler.times_arrived_last, straggler.num_collectives,
    straggler.pct_arrived_last, straggler.total_wait_us as straggler_wait_us,
    coalesce(runner_up.times_arrived_last, 0) as runner_up_times_last,
    lost.late_collectives, lost.others_wait_us, lost.lead_over_next_us, others_exposed.others_exposed_comm_us,
    least(lost.lead_over_next_us, coalesce(others_exposed.others_exposed_comm_us, lost.lead_over_next_us))
        as recoverable_us,
    job_step.job_step_us,
    100.0 * least(lost.lead_over_next_us, coalesce(others_exposed.others_exposed_comm_us, lost.lead_over_next_us))
        / nullif(job_step.job_step_us, 0) as recoverable_pct_of_step
from straggler
cross join runner_up
cross join lost
cross join others_exposed
cross join job_step"""

# Why the straggler is late. Over the collectives it arrives last at, its arrival splits into when
# its window opened (the previous collective's end, or its first GPU work for the first collective;
# measured from the earliest rank's, on the job clock) and what filled the window
# (collective_preceding_work): GPU work by launching op and module, GPU idle, and the host's root
# ops meanwhile (they overlap the idle: a host-side reason, not an addition). Each part on the
# straggler against the median of the other ranks (per collective, summed; a part a rank lacks is
# 0); the rows are the parts where the straggler spends longer, largest excess first.
WHY_LATE_SQL = """
with params as (select ?::varchar as job_id, ?::integer as straggler_rank),
late_collectives as (
    select i.job_id, i.instance_id
    from collective_instances as i
    cross join params
    where i.job_id = params.job_id and i.last_arrival_rank = params.straggler_rank and not i.is_desync
        and (i.collective_kind = 'implicit_sync' or (i.match_method = 'stream_ordinal' and i.collective_name = 'unknown'))
),
calls as (
    select c.rank, c.instance_id, c.trace_id, c.event_idx, c.start_us
    from collective_calls as c
    inner join late_collectives as l on l.job_id = c.job_id and l.instance_id = c.instance_id
),
windows as (
    select calls.rank, calls.instance_id, calls.start_us - coalesce(max(w.window_us), 0) as window_start_us
    from calls
    left join collective_preceding_work as w on w.trace_id = calls.trace_id and w.comm_event_idx = calls.event_idx
    group by calls.rank, calls.instance_id, calls.start_us
),
parts as (
    select rank, instance_id, 'window_start' as kind, '' as name, '' as module,
        window_start_us - min(window_start_us) over (partition by instance_id) as value_us
    from windows
    union all
    select calls.rank, calls.instance_id, w.work_side as kind,
        coalesce(case when w.work_side = 'gpu' then w.op_name else w.root_op_name end, '') as name,
        coalesce(w.module_name, '') as module, coalesce(w.kernel_us, w.host_us, w.idle_us, 0) as value_us
    from calls
    inner join collective_preceding_work as w on w.trace_id = calls.trace_id and w.comm_event_idx = calls.event_idx
),
part_keys as (
    select distinct instance_id, kind, name, module from parts
),
every_rank as (
    select calls.rank, k.instance_id, k.kind, k.name, k.module, coalesce(sum(p.value_us), 0) as value_us
    from calls
    inner join part_keys as k on k.instance_id = calls.instance_id
    left join parts as p
        on p.rank = calls.rank and p.instance_id = k.instance_id and p.kind = k.kind and p.name = k.name
        and p.module = k.module
    group by calls.rank, k.instance_id, k.kind, k.name, k.module
),
per_collective as (
    select e.instance_id, e.kind, e.name, e.module,
        sum(e.value_us) filter (where e.rank = params.straggler_rank) as straggler_us,
        median(e.value_us) filter (where e.rank <> params.straggler_rank) as median_rank_us
    from every_rank as e
    cross join params
    group by e.instance_id, e.kind, e.name, e.module
),
compared as (
    select kind, name, module, sum(straggler_us) as straggler_us, sum(median_rank_us) as median_rank_us
    from per_collective
    group by kind, name, module
)
select params.straggler_rank as rank, compared.kind, compared.name, compared.module, compared.straggler_us,
    compared.median_rank_us, compared.straggler_us - compared.median_rank_us as excess_us,
    (select count(*) from late_collectives) as late_collectives
from compared
cross join params
where compared.straggler_us > compared.median_rank_us
order by excess_us desc, compared.kind, compared.name, compared.module"""

# Per collective signature: its bound (collective_signatures.bound, vllm#52777's classes), bus
# bandwidth against the link's peak, and the median latency above what its bytes take at the
# attainable share of the peak, times its count (the bandwidth finding's time, for the
# bandwidth-bound ones: the link is the limit, and below the attainable share some of it is left).
SIGNATURES_SQL = """
with params as (select ?::varchar as job_id, ?::double as attainable_share)
select s.collective_name, s.dtype, s.msg_bytes, s.pg_name, s.node_span, s.instance_count,
    s.median_latency_us, s.median_bus_gb_per_s, s.peak_bus_gb_per_s, 100.0 * s.bandwidth_fraction as pct_of_peak,
    s.median_start_skew_us, s.total_wait_us, s.bound, s.bound_reason,
    s.instance_count * greatest(s.median_latency_us
        - s.median_latency_us * s.median_bus_gb_per_s / nullif(s.peak_bus_gb_per_s * params.attainable_share, 0), 0)
        as recoverable_us
from collective_signatures as s
cross join params
where s.job_id = params.job_id
order by s.total_wait_us desc, s.collective_name, s.msg_bytes"""

# All-to-all(v) instances above the imbalance setting: the hot (src, dst) pair, and the share of the
# collective the imbalance costs: its latency (the fastest rank's duration) x (1 - mean / max of the
# per-rank bytes).
ALLTOALL_SQL = """
with params as (select ?::varchar as job_id, ?::double as imbalance_max)
select a.instance_id, a.collective_name, a.min_rank_dur_us as comm_latency_us, a.size_imbalance,
    a.throughput_gb_per_s, a.hot_src_rank, a.hot_dst_rank, a.hot_pair_bytes,
    a.min_rank_dur_us * (1 - 1 / a.size_imbalance) as recoverable_us
from alltoall_instances as a
cross join params
where a.job_id = params.job_id and a.size_imbalance > params.imbalance_max
order by recoverable_us desc, a.instance_id"""

# Collectives some rank of their group is missing, or whose ranks disagree on the size or type.
DESYNC_SQL = """
with params as (select ?::varchar as job_id)
select i.instance_id, i.pg_name, i.index_in_group, i.collective_name, i.ranks_expected, i.ranks_present,
    i.desync_reason
from collective_instances as i
cross join params
where i.job_id = params.job_id and i.is_desync
order by i.pg_name, i.index_in_group, i.instance_id"""

# Per node: the median end skew of its node-local implicit-sync collectives (they end together on
# one clock; TraceLens issue #22) and how many exceed the setting.
CLOCK_SQL = """
with params as (select ?::varchar as job_id, ?::double as end_skew_max_us),
node_local as (
    select c.instance_id, min(c.node_id) as node_id
    from collective_calls as c
    cross join params
    where c.job_id = params.job_id and c.collective_kind = 'implicit_sync'
    group by c.instance_id
    having count(distinct c.node_id) = 1
)
select n.node_id, count(*) as collectives, median(i.end_skew_us) as median_end_skew_us,
    max(i.end_skew_us) as max_end_skew_us, count(*) filter (where i.end_skew_us > params.end_skew_max_us) as above
from node_local as n
inner join collective_instances as i on i.instance_id = n.instance_id
cross join params
where i.job_id = params.job_id
group by n.node_id
having median(i.end_skew_us) > max(params.end_skew_max_us)
order by n.node_id"""

# Per rank: the exposed communication that is transfer, not waiting (exposed communication less the
# rank's waits at collectives), and the computation not already under communication that could
# hide it; the job-level figure is the median rank's.
EXPOSED_TRANSFER_SQL = """
with params as (select ?::varchar as job_id),
per_rank as (
    select b.rank, b.span_us, b.communication_us as comm_us, b.exposed_comm_us,
        coalesce(s.total_wait_us, 0) as wait_us,
        greatest(b.exposed_comm_us - coalesce(s.total_wait_us, 0), 0) as exposed_transfer_us,
        greatest(b.computation_us - (b.communication_us - b.exposed_comm_us), 0) as free_compute_us
    from job_rank_breakdown as b
    cross join params
    left join job_straggler_summary as s on s.job_id = b.job_id and s.rank = b.rank
    where b.job_id = params.job_id
)
select rank, span_us, comm_us, exposed_comm_us, wait_us, exposed_transfer_us, free_compute_us,
    least(exposed_transfer_us, free_compute_us) as hideable_us,
    median(least(exposed_transfer_us, free_compute_us)) over () as median_hideable_us,
    (select j.step_time_us from jobs as j cross join params where j.job_id = params.job_id) as job_step_us
from per_rank
order by rank"""

# The job's time breakdown per rank (the report's table), with the straggler flag.
BREAKDOWN_SQL = """
with params as (select ?::varchar as job_id)
select b.rank, b.node_id, b.span_us, b.busy_us, b.computation_us, b.communication_us, b.exposed_comm_us,
    b.idle_us, b.comm_comp_overlap_percent, s.total_wait_us, s.times_arrived_last
from job_rank_breakdown as b
cross join params
left join job_straggler_summary as s on s.job_id = b.job_id and s.rank = b.rank
where b.job_id = params.job_id
order by b.rank"""

# The spread of the per-rank breakdown: median, min and max over the ranks, one row each.
BREAKDOWN_SPREAD_SQL = """
with params as (select ?::varchar as job_id),
per_rank as (
    select b.*
    from job_rank_breakdown as b
    cross join params
    where b.job_id = params.job_id
),
spread as (
    select 1 as position, 'median' as statistic, median(span_us) as span_us, median(busy_us) as busy_us,
        median(computation_us) as computation_us, median(communication_us) as communication_us,
        median(exposed_comm_us) as exposed_comm_us, median(idle_us) as idle_us,
        median(comm_comp_overlap_percent) as comm_comp_overlap_percent
    from per_rank
    union all
    select 2, 'min', min(span_us), min(busy_us), min(computation_us), min(communication_us), min(exposed_comm_us),
        min(idle_us), min(comm_comp_overlap_percent)
    from per_rank
    union all
    select 3, 'max', max(span_us), max(busy_us), max(computation_us), max(communication_us), max(exposed_comm_us),
        max(idle_us), max(comm_comp_overlap_percent)
    from per_rank
)
select statistic, span_us, busy_us, computation_us, communication_us, exposed_comm_us, idle_us, comm_comp_overlap_percent
from spread
order by position"""


# When each rank enters its first profiled step (profiler_steps.host_start_us, on the job clock: its
# base less the job's epoch, less its node's applied offset), the straggler's lag behind the median of
# the other ranks, and how many steps each rank's trace holds: a straggler that is late by the time
# its step begins was delayed before the window the traces show.
STEP_ENTRY_SQL = """
with params as (select ?::varchar as job_id, ?::integer as straggler_rank),
entries as (
    select r.rank, count(p.step_number) as profiled_steps,
        min(p.host_start_us) + (r.base_time_us - j.epoch_us)
            - case when o.applied then coalesce(o.offset_us, 0) else 0 end as step_entry_us
    from job_ranks as r
    cross join params
    inner join jobs as j on j.job_id = r.job_id
    inner join profiler_steps as p on p.trace_id = r.trace_id
    left join job_clock_offsets as o on o.job_id = r.job_id and o.node_id = r.node_id
    where r.job_id = params.job_id
    group by r.rank, r.base_time_us, j.epoch_us, o.applied, o.offset_us
)
select
    max(e.step_entry_us) filter (where e.rank = params.straggler_rank)
        - median(e.step_entry_us) filter (where e.rank <> params.straggler_rank) as entry_lag_us,
    max(e.profiled_steps) as profiled_steps,
    count(*) as ranks_with_steps
from entries as e
cross join params"""


# What each rank's own report leads with: its P1 as its latest standalone analysis recorded it (the
# `findings` table analyze writes), so the job report shows the per-rank levers beside the job's.
RANK_LEADS_SQL = """
with params as (select ?::varchar as job_id)
select r.rank, f.title, f.category, f.recoverable_ms, f.impact_mid_percent, f.estimate_method
from job_ranks as r
cross join params
inner join findings as f on f.trace_id = r.trace_id and f.trace2_id is null and f.global_rank = 1
where r.job_id = params.job_id
order by r.rank"""
