"""`tracelake compare job:A job:B`: two multi-rank jobs side by side (docs/jobs.md).

- Per collective signature (`collective_signatures`: name, dtype, message bytes, process group,
  intra- / inter-node): instances, median latency (TraceLens' comm_latency, the fastest rank's
  duration), median bus bandwidth (GB/s), total wait of the ranks, skew- or bandwidth-bound.
- Per-rank spread (`job_rank_spread`): min / median / max over the ranks of step time,
  communication, wait and kernel time, with the ranks at the ends.
- The straggler of each side (`job_straggler_summary`, TraceLens' rule: the rank that waits least).

Verdict: the job runs at the pace of its slowest rank, so the candidate regresses when its median or
its slowest rank's step time, or its median rank's kernel time (collectives included), is slower
than the baseline's by more than the threshold. A job's ranks are not repeated samples of one
another, so there is no noise band: the threshold decides alone. Signatures and the other spreads
are listed, never fatal.
"""

from __future__ import annotations

from typing import Any, Literal

import duckdb
from pydantic import BaseModel

from tracelake.core.errors import TraceLakeError

SignatureStatus = Literal["both", "new", "gone"]
GATING_SPREADS = (("step_time", "median_ms", "median rank's step time"),
                  ("step_time", "max_ms", "slowest rank's step time"),
                  ("kernel_time", "median_ms", "median rank's kernel time"))

SIDE_SQL = """
select j.job_id, j.world_size, j.rank_count, j.platforms, s.rank as straggler_rank,
    s.times_arrived_last as straggler_times_arrived_last, s.num_collectives as collective_count,
    s.total_wait_us / 1000.0 as straggler_wait_ms
from jobs j
left join (
    select * from job_straggler_summary where job_id = $job and num_collectives > 0
    qualify row_number() over (order by total_wait_us, rank) = 1
) s using (job_id)
where j.job_id = $job
"""

# per side, then paired on the signature (a side without it: new / gone)
SIGNATURES_SQL = """
with baseline as (select * from collective_signatures where job_id = $baseline),
candidate as (select * from collective_signatures where job_id = $candidate)
select
    coalesce(b.collective_name, c.collective_name) as collective_name,
    coalesce(b.dtype, c.dtype, '') as dtype,
    coalesce(b.msg_bytes, c.msg_bytes) as msg_bytes,
    coalesce(b.pg_name, c.pg_name) as pg_name,
    coalesce(b.group_size, c.group_size) as group_size,
    coalesce(b.node_span, c.node_span) as node_span,
    b.instance_count as baseline_count, c.instance_count as candidate_count,
    b.median_latency_us as baseline_latency_us, c.median_latency_us as candidate_latency_us,
    b.median_bus_gb_per_s as baseline_bus_gb_per_s, c.median_bus_gb_per_s as candidate_bus_gb_per_s,
    b.total_wait_us / 1000.0 as baseline_wait_ms, c.total_wait_us / 1000.0 as candidate_wait_ms,
    b.bound as baseline_bound, c.bound as candidate_bound
from baseline b
full outer join candidate c
    on b.collective_name is not distinct from c.collective_name and b.dtype is not distinct from c.dtype
    and b.msg_bytes is not distinct from c.msg_bytes and b.pg_name is not distinct from c.pg_name
    and b.node_span is not distinct from c.node_span
order by coalesce(b.median_latency_us * b.instance_count, 0) + coalesce(c.median_latency_us * c.instance_count, 0) desc,
    collective_name, msg_bytes
"""

SPREAD_SQL = """
select metric, b.min_ms as baseline_min_ms, b.median_ms as baseline_median_ms, b.max_ms as baseline_max_ms,
    b.max_rank as baseline_max_rank, c.min_ms as candidate_min_ms, c.median_ms as candidate_median_ms,
    c.max_ms as candidate_max_ms, c.max_rank as candidate_max_rank
from (select * from job_rank_spread where job_id = $baseline) b
full outer join (select * from job_rank_spread where job_id = $candidate) c using (metric)
order by case metric when 'step_time' then 1 when 'communication' then 2 when 'wait' then 3 else 4 end, metric
"""


class JobSide(BaseModel):
    job_id: str
    world_size: int | None
    rank_count: int
    platforms: list[str]
    straggler_rank: int | None  # None without a matched collective
    straggler_times_arrived_last: int | None
    straggler_wait_ms: float | None
    collective_count: int | None


class SignatureChange(BaseModel):
    collective_name: str | None
    dtype: str
    msg_bytes: int | None
    pg_name: str | None
    group_size: int | None
    node_span: str | None
    status: SignatureStatus
    baseline_count: int | None
    candidate_count: int | None
    baseline_latency_us: float | None  # median over the instances of the fastest rank's duration
    candidate_latency_us: float | None
    latency_change_percent: float | None
    baseline_bus_gb_per_s: float | None  # median, decimal GB/s
    candidate_bus_gb_per_s: float | None
    baseline_wait_ms: float | None  # summed over the instances and their ranks
    candidate_wait_ms: float | None
    baseline_bound: str | None  # collective_signatures.bound: skew | bandwidth | mixed | inconclusive
    candidate_bound: str | None


class SpreadChange(BaseModel):
    metric: str  # job_rank_spread.metric
    baseline_min_ms: float | None
    baseline_median_ms: float | None
    baseline_max_ms: float | None
    baseline_max_rank: int | None
    candidate_min_ms: float | None
    candidate_median_ms: float | None
    candidate_max_ms: float | None
    candidate_max_rank: int | None
    median_change_percent: float | None
    max_change_percent: float | None


class JobComparison(BaseModel):
    """`tracelake compare job:A job:B --format json`."""

    kind: Literal["jobs"] = "jobs"
    regression: bool  # the CLI exits 1 when true
    summary: str
    threshold_percent: float
    baseline: JobSide
    candidate: JobSide
    signatures: list[SignatureChange]  # largest total latency first
    spreads: list[SpreadChange]
    failures: list[str]


def query_rows(db: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = db.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _change(before: float | None, after: float | None) -> float | None:
    return 100.0 * (after - before) / before if before and after is not None else None


def _side(db: duckdb.DuckDBPyConnection, job_id: str) -> JobSide:
    rows = query_rows(db, SIDE_SQL, {"job": job_id})
    if not rows:
        raise TraceLakeError(f"no job {job_id!r} in the warehouse's jobs")
    row = rows[0]
    platforms = row["platforms"]
    return JobSide(**{**row, "platforms": [str(p) for p in platforms] if isinstance(platforms, list) else
                      [p for p in str(platforms or "").split(",") if p]})


def _signature(row: dict) -> SignatureChange:
    status: SignatureStatus = ("both" if row["baseline_count"] and row["candidate_count"]
                               else "new" if row["candidate_count"] else "gone")
    return SignatureChange(**row, status=status,
                           latency_change_percent=_change(row["baseline_latency_us"], row["candidate_latency_us"]))


def compare_jobs(db: duckdb.DuckDBPyConnection, baseline: str, candidate: str, threshold_percent: float) -> JobComparison:
    """Two jobs of the warehouse compared; `regression` when a gating step time is slower beyond the threshold."""
    sides = {"baseline": baseline, "candidate": candidate}
    spreads = [SpreadChange(**row, median_change_percent=_change(row["baseline_median_ms"], row["candidate_median_ms"]),
                            max_change_percent=_change(row["baseline_max_ms"], row["candidate_max_ms"]))
               for row in query_rows(db, SPREAD_SQL, sides)]
    changes: list[tuple[str, float]] = []  # (label, change %) of the gating metrics both sides have
    for metric, column, label in GATING_SPREADS:
        spread = next((s for s in spreads if s.metric == metric), None)
        change = getattr(spread, f"{column.removesuffix('_ms')}_change_percent") if spread else None
        if change is not None:
            changes.append((label, change))
    failures = [label for label, change in changes if change > threshold_percent]
    # the line names the worst failing metric, else the first gating one
    worst = max(changes, key=lambda c: c[1]) if failures else (changes[0] if changes else None)
    deciding = f"{worst[0]} {worst[1]:+.1f} %" if worst else ""
    verdict = "REGRESSION" if failures else "OK"
    summary = (f"{verdict}: job {candidate} against job {baseline}: "
               + (deciding or "no step time on one side") + f" (threshold {threshold_percent:g} %)")
    return JobComparison(
        regression=bool(failures), summary=summary, threshold_percent=threshold_percent,
        baseline=_side(db, baseline), candidate=_side(db, candidate),
        signatures=[_signature(row) for row in query_rows(db, SIGNATURES_SQL, sides)], spreads=spreads,
        failures=failures)
