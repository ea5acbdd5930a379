"""The dashboard's jobs: one row per multi-rank job (docs/jobs.md), gathered from the job marts.

Per job: its ranks present against its world size (`jobs`), the spread of its ranks' step time,
communication, wait and kernel time (`job_rank_spread`), its straggler (`job_straggler_summary`:
TraceLens' rule, the rank that waits least, with how often it arrived last) and a chart of kernel
time per category and rank, the collectives among the categories (`job_rank_categories`). A
warehouse whose models predate the job marts has no jobs section.
"""

from __future__ import annotations

from typing import Any

import duckdb
from pydantic import BaseModel

JOB_TABLES = ("jobs", "job_rank_spread", "job_rank_categories", "job_straggler_summary", "job_rank_metrics")
COLLECTIVES = "collectives"  # trace_category_kernel_time's category of the communication kernels
SPREAD_METRICS = ("step_time", "communication", "wait", "kernel_time")  # job_rank_spread.metric, in display order

_JOBS_SQL = """
select job_id, world_size, rank_count, missing_ranks, node_count, platforms, clock_method, clock_uncertainty_us
from jobs
order by job_id
"""
_SPREAD_SQL = "select * from job_rank_spread order by job_id, metric"
_CATEGORY_SQL = "select * from job_rank_categories order by job_id, rank, category_rank"
# TraceLens' straggler_summary is sorted by total wait ascending: its first row is the straggler
_STRAGGLER_SQL = """
select job_id, rank, total_wait_us, times_arrived_last, pct_arrived_last, num_collectives
from job_straggler_summary
where num_collectives > 0
qualify row_number() over (partition by job_id order by total_wait_us, rank) = 1
"""
_RANKS_SQL = "select job_id, rank, trace_id, file_name from job_rank_metrics order by job_id, rank"


class RankSpread(BaseModel):
    """One metric over a job's ranks (job_rank_spread)."""

    metric: str  # step_time | communication | wait | kernel_time
    rank_count: int
    min_ms: float | None
    median_ms: float | None
    max_ms: float | None
    min_rank: int | None
    max_rank: int | None


class Straggler(BaseModel):
    rank: int
    total_wait_ms: float
    times_arrived_last: int
    pct_arrived_last: float | None
    collective_count: int


class RankCategoryTime(BaseModel):
    category: str
    kernel_time_ms: float
    percent: float | None  # of the rank's kernel time


class RankColumn(BaseModel):
    rank: int
    trace_id: str
    file_name: str
    categories: list[RankCategoryTime]  # the job's chart categories (largest first), then the rest


class JobRow(BaseModel):
    job_id: str
    world_size: int | None
    rank_count: int
    missing_ranks: list[int]
    node_count: int | None
    platforms: list[str]
    clock_method: str | None
    clock_uncertainty_us: float | None
    spreads: list[RankSpread]
    straggler: Straggler | None  # None when the job has no matched collective
    categories: list[str]  # chart order; the rest category last when the job has more
    ranks: list[RankColumn]

    def spread(self, metric: str) -> RankSpread | None:
        return next((s for s in self.spreads if s.metric == metric), None)


def _rows(db: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    result = db.execute(sql)
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


def _platforms(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [p for p in str(value).split(",") if p]


def gather_jobs(db: duckdb.DuckDBPyConnection, tables: set[str]) -> list[JobRow]:
    """Every job of the warehouse, by name; [] when its models predate the job marts."""
    if any(t not in tables for t in JOB_TABLES):
        return []
    spreads: dict[str, list[RankSpread]] = {}
    for row in _rows(db, _SPREAD_SQL):
        spreads.setdefault(row["job_id"], []).append(RankSpread(**{k: row[k] for k in RankSpread.model_fields}))
    stragglers = {row["job_id"]: Straggler(
        rank=row["rank"], total_wait_ms=row["total_wait_us"] / 1000.0, times_arrived_last=row["times_arrived_last"],
        pct_arrived_last=row["pct_arrived_last"], collective_count=row["num_collectives"])
        for row in _rows(db, _STRAGGLER_SQL)}
    columns: dict[tuple[str, int], RankColumn] = {
        (row["job_id"], row["rank"]): RankColumn(rank=row["rank"], trace_id=row["trace_id"],
                                                 file_name=row["file_name"], categories=[])
        for row in _rows(db, _RANKS_SQL)}
    category_ranks: dict[str, dict[str, int]] = {}
    for row in _rows(db, _CATEGORY_SQL):
        column = columns.get((row["job_id"], row["rank"]))
        if column is not None:
            column.categories.append(RankCategoryTime(category=row["category"], kernel_time_ms=row["kernel_time_ms"],
                                                      percent=row["percent"]))
        category_ranks.setdefault(row["job_id"], {})[row["category"]] = row["category_rank"]
    jobs = []
    for row in _rows(db, _JOBS_SQL):
        job_id = row["job_id"]
        ranks_of = category_ranks.get(job_id, {})
        jobs.append(JobRow(
            job_id=job_id, world_size=row["world_size"], rank_count=row["rank_count"],
            missing_ranks=list(row["missing_ranks"] or []), node_count=row["node_count"],
            platforms=_platforms(row["platforms"]), clock_method=row["clock_method"],
            clock_uncertainty_us=row["clock_uncertainty_us"],
            spreads=sorted(spreads.get(job_id, []), key=lambda s: _metric_order(s.metric)),
            straggler=stragglers.get(job_id), categories=sorted(ranks_of, key=ranks_of.__getitem__),
            ranks=[c for (j, _), c in sorted(columns.items()) if j == job_id]))
    return jobs


def _metric_order(metric: str) -> int:
    return SPREAD_METRICS.index(metric) if metric in SPREAD_METRICS else len(SPREAD_METRICS)
