"""The job's consistency and what overlap could still hide.

- Desync: a collective some rank of its group is missing, or whose ranks disagree on its size or
  type (collective_instances.is_desync): a finding, never an exception; unestimated (a hang risk
  and a wrong match, not a time).
- Clock anomaly: the ranks of one node end their implicit-sync collectives more than
  settings.CLOCK_END_SKEW_MAX_US apart at the median (TraceLens issue #22): the waits on that node
  are not measurable; unestimated, low confidence for every timing finding it touches.
- Exposed transfer: per rank, exposed communication less its waiting (EXPOSED_TRANSFER_SQL), that
  computation not already under communication could hide; the median rank's, x the mid overlap
  recovery fraction (settings.OVERLAP_RECOVERY_FRACTIONS). Only transfer: waiting for a late rank is
  the straggler's, and overlap does not hide it.
"""

from __future__ import annotations

from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, Finding
from tracelake.analyzers.job_common import JobContext, impact, inline, job_finding, result, rows
from tracelake.analyzers.job_queries import CLOCK_SQL, DESYNC_SQL, EXPOSED_TRANSFER_SQL

AGENT_NAME = "job_health"
DISPLAY_NAME = "Job consistency and overlap"


def _desync(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> Finding | None:
    sql = inline(DESYNC_SQL, ctx.job_id)
    found = rows(db, sql)
    if not found:
        return None
    reasons = sorted({str(r["desync_reason"]) for r in found})
    first = found[0]
    values = {"job_id": ctx.job_id, "count": len(found), "reasons": reasons, "pg_name": first["pg_name"],
              "index_in_group": first["index_in_group"], "collective_name": first["collective_name"],
              "ranks_expected": first["ranks_expected"], "ranks_present": first["ranks_present"]}
    return job_finding(AGENT_NAME, "desync", "desync", values, evidence_sql=sql, confidence="high",
                       fields={"estimate_method": "qualitative"})


def _clock(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> Finding | None:
    sql = inline(CLOCK_SQL, ctx.job_id, settings.CLOCK_END_SKEW_MAX_US)
    found = rows(db, sql)
    if not found:
        return None
    nodes = [{"node": int(r["node_id"]), "collectives": int(r["collectives"]),
              "median_us": float(r["median_end_skew_us"]), "max_us": float(r["max_end_skew_us"]),
              "above": int(r["above"])} for r in found]
    values = {"job_id": ctx.job_id, "nodes": nodes, "end_skew_max_us": settings.CLOCK_END_SKEW_MAX_US,
              "clock_method": ctx.clock_method}
    return job_finding(AGENT_NAME, "clock-anomaly", "clock_anomaly", values, evidence_sql=sql, confidence="medium",
                       fields={"estimate_method": "qualitative"})


def _exposed_transfer(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> Finding | None:
    sql = inline(EXPOSED_TRANSFER_SQL, ctx.job_id)
    found = rows(db, sql)
    if not found or ctx.job_step_ms <= 0:
        return None
    median_us = float(found[0]["median_hideable_us"] or 0.0)
    share = 100.0 * median_us / (1000.0 * ctx.job_step_ms)
    if share <= settings.EXPOSED_COMM_PERCENT_MAX:
        return None
    mid = settings.OVERLAP_RECOVERY_FRACTIONS[1]
    per_rank = [{"rank": int(r["rank"]), "exposed_ms": float(r["exposed_comm_us"]) / 1000.0,
                 "wait_ms": float(r["wait_us"]) / 1000.0, "transfer_ms": float(r["exposed_transfer_us"]) / 1000.0,
                 "hideable_ms": float(r["hideable_us"]) / 1000.0} for r in found]
    values: dict[str, Any] = {"job_id": ctx.job_id, "ranks": per_rank, "median_hideable_ms": median_us / 1000.0,
                              "share": share, "fraction": mid, "job_step_ms": ctx.job_step_ms}
    return job_finding(AGENT_NAME, "exposed-transfer", "exposed_transfer", values, evidence_sql=sql,
                       confidence="medium", fields=impact(mid * median_us, ctx, "heuristic"))


def analyze(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> AgentResult:
    found = [f for f in (_desync(db, ctx), _clock(db, ctx), _exposed_transfer(db, ctx)) if f is not None]
    return result(AGENT_NAME, found)
