"""The job's collectives by signature: bound by arrival skew or by the link (collective_signatures,
vllm#52777's classes), and all-to-all(v) imbalance with its hot pair.

- Skew-bound signatures: one finding listing them, unestimated: their time is waiting for a late
  rank, which the straggler finding counts.
- Bandwidth-bound signatures: their median latency (the fastest rank's duration, i.e. transfer) above
  what their bytes take at settings.COLLECTIVE_ATTAINABLE_PEAK_PERCENT of the link's peak bus
  bandwidth, times their count (SIGNATURES_SQL `recoverable_us`). All-to-all signatures are left to
  the imbalance finding when one is made (one claim per microsecond).
- All-to-all(v) above settings.ALLTOALL_IMBALANCE_MAX: (1 - mean / max) of each instance's latency.
"""

from __future__ import annotations

from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, Finding
from tracelake.analyzers.job_common import JobContext, impact, inline, job_finding, result, rows
from tracelake.analyzers.job_queries import ALLTOALL_SQL, SIGNATURES_SQL

AGENT_NAME = "job_collectives"
DISPLAY_NAME = "Collectives across ranks"
ALLTOALL_NAMES = ("alltoall", "alltoallv")


def signature_sql(job_id: str) -> str:
    return inline(SIGNATURES_SQL, job_id, settings.COLLECTIVE_ATTAINABLE_PEAK_PERCENT / 100.0)


def alltoall_sql(job_id: str) -> str:
    return inline(ALLTOALL_SQL, job_id, settings.ALLTOALL_IMBALANCE_MAX)


def _signature(row: dict[str, Any]) -> dict[str, Any]:
    return {"name": row["collective_name"], "dtype": row["dtype"],
            "msg_mb": None if row["msg_bytes"] is None else float(row["msg_bytes"]) / 1e6,
            "msg_bytes": None if row["msg_bytes"] is None else int(row["msg_bytes"]),
            "pg_name": row["pg_name"], "node_span": row["node_span"], "count": int(row["instance_count"]),
            "latency_us": _num(row["median_latency_us"]), "bus_gb_per_s": _num(row["median_bus_gb_per_s"]),
            "peak_gb_per_s": _num(row["peak_bus_gb_per_s"]), "pct_of_peak": _num(row["pct_of_peak"]),
            "skew_us": _num(row["median_start_skew_us"]), "wait_ms": (_num(row["total_wait_us"]) or 0.0) / 1000.0,
            "bound": row["bound"], "bound_reason": row["bound_reason"],
            "recoverable_ms": (_num(row["recoverable_us"]) or 0.0) / 1000.0}


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _skew_finding(skew: list[dict[str, Any]], sql: str, ctx: JobContext) -> Finding:
    values = {"job_id": ctx.job_id, "signatures": skew, "count": sum(s["count"] for s in skew),
              "wait_ms": sum(s["wait_ms"] for s in skew)}
    return job_finding(AGENT_NAME, "skew-bound", "skew_bound", values, evidence_sql=sql, confidence="high",
                       fields={"estimate_method": "qualitative",
                               "operations": sorted({str(s["name"]) for s in skew})})


def _bandwidth_finding(bandwidth: list[dict[str, Any]], sql: str, ctx: JobContext) -> Finding:
    recoverable_ms = sum(s["recoverable_ms"] for s in bandwidth)
    values = {"job_id": ctx.job_id, "signatures": bandwidth, "count": sum(s["count"] for s in bandwidth),
              "recoverable_ms": recoverable_ms, "job_step_ms": ctx.job_step_ms,
              "attainable_percent": settings.COLLECTIVE_ATTAINABLE_PEAK_PERCENT}
    return job_finding(AGENT_NAME, "bandwidth-bound", "bandwidth_bound", values, evidence_sql=sql,
                       confidence="medium",
                       fields={**impact(1000.0 * recoverable_ms, ctx),
                               "operations": sorted({str(s["name"]) for s in bandwidth})})


def _alltoall_finding(instances: list[dict[str, Any]], sql: str, ctx: JobContext) -> Finding:
    worst = instances[0]
    recoverable_us = sum(float(r["recoverable_us"]) for r in instances)
    values = {"job_id": ctx.job_id, "count": len(instances), "recoverable_ms": recoverable_us / 1000.0,
              "max_imbalance": max(float(r["size_imbalance"]) for r in instances),
              "hot_src": worst["hot_src_rank"], "hot_dst": worst["hot_dst_rank"],
              "hot_pair_mb": None if worst["hot_pair_bytes"] is None else float(worst["hot_pair_bytes"]) / 1e6,
              "worst_latency_us": float(worst["comm_latency_us"]), "worst_imbalance": float(worst["size_imbalance"]),
              "imbalance_max": settings.ALLTOALL_IMBALANCE_MAX, "job_step_ms": ctx.job_step_ms}
    return job_finding(AGENT_NAME, "alltoall-imbalance", "alltoall_imbalance", values, evidence_sql=sql,
                       confidence="medium",
                       fields={**impact(recoverable_us, ctx),
                               "operations": sorted({str(r["collective_name"]) for r in instances})})


def signatures(db: duckdb.DuckDBPyConnection, job_id: str) -> list[dict[str, Any]]:
    """Every collective signature of the job (the report's collective table)."""
    return [_signature(r) for r in rows(db, signature_sql(job_id))]


def analyze(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> AgentResult:
    sig_sql, a2a_sql = signature_sql(ctx.job_id), alltoall_sql(ctx.job_id)
    every = signatures(db, ctx.job_id)
    imbalanced = rows(db, a2a_sql)
    found: list[Finding] = []
    skew = [s for s in every if s["bound"] == "skew"]
    if skew:
        found.append(_skew_finding(skew, sig_sql, ctx))
    bandwidth = [s for s in every if s["bound"] == "bandwidth" and s["recoverable_ms"] > 0
                 and not (imbalanced and s["name"] in ALLTOALL_NAMES)]
    if bandwidth:
        found.append(_bandwidth_finding(bandwidth, sig_sql, ctx))
    if imbalanced:
        found.append(_alltoall_finding(imbalanced, a2a_sql, ctx))
    return result(AGENT_NAME, found, {"signatures": every})
