"""The job analyzers, in order, and the job's context they read (the `jobs` mart row and the job's
step time). Each analyzer reads only the job marts (docs/jobs.md) and returns an AgentResult whose
findings are % of the job's step time."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from tracelake.analyzers import job_collectives, job_health, job_straggler
from tracelake.analyzers.contracts import AgentResult
from tracelake.analyzers.job_common import JobContext, inline, rows
from tracelake.analyzers.job_queries import JOB_SQL
from tracelake.core.errors import BadTraceError

JobAnalyzer = Callable[[duckdb.DuckDBPyConnection, JobContext], AgentResult]
JOB_ANALYZERS: tuple[tuple[str, str, JobAnalyzer], ...] = tuple(
    (module.AGENT_NAME, module.DISPLAY_NAME, module.analyze) for module in (job_straggler, job_collectives, job_health))


def job_context(db: duckdb.DuckDBPyConnection, job_id: str) -> JobContext:
    """The job's row of `jobs` with its step time; a job the warehouse does not hold is a BadTraceError."""
    found = rows(db, inline(JOB_SQL, job_id))
    if not found:
        raise BadTraceError(f"job {job_id!r} is not in the warehouse; `tracelake analyze JOB_DIR` ingests it")
    row = found[0]
    return JobContext(
        job_id=job_id, world_size=int(row["world_size"]), rank_count=int(row["rank_count"]),
        missing_ranks=[int(r) for r in row["missing_ranks"] or []], node_count=int(row["node_count"] or 1),
        platforms=[str(p) for p in _as_list(row["platforms"])], clock_method=str(row["clock_method"]),
        clock_uncertainty_us=None if row["clock_uncertainty_us"] is None else float(row["clock_uncertainty_us"]),
        job_step_ms=float(row["job_step_us"] or 0.0) / 1000.0)


def _as_list(value: object) -> list[object]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [part.strip() for part in str(value).split(",") if part.strip()]


def run_job_analyzers(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> list[AgentResult]:
    """Every job analyzer's result; one that fails is an ERROR result, not a failed report."""
    results = []
    for name, _display, analyze in JOB_ANALYZERS:
        try:
            results.append(analyze(db, ctx))
        except duckdb.Error as exc:
            results.append(AgentResult(agent=name, tier="system", category=name, status="ERROR",
                                       error=f"{type(exc).__name__}: {exc}"))
    return results
