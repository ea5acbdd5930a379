"""The job's straggler (the rank the others wait for) and why it is late.

Straggler: the rank last at the most implicit-sync collectives (job_straggler_summary, TraceLens'
straggler summary), named when it is last at no fewer than
settings.STRAGGLER_LAST_ARRIVAL_PERCENT_MIN of at least settings.STRAGGLER_MIN_COLLECTIVES
collectives and more often than any other rank. What the step gains if it alone arrives on time: per
collective it arrives last at, its lead over the next-latest rank, summed; capped by the others'
mean exposed communication (STRAGGLER_SQL). The others' mean wait, summed, is stated beside it: what
bringing every late rank in would recover.

Why: its GPU work before those collectives (collective_preceding_work) by op and module against the
median of the other ranks (WHY_LATE_SQL, the table vllm#52911 builds by hand). The op with the
largest excess is named in the straggler finding's action; the comparison is a finding of its own,
unestimated (its time is the straggler finding's: one claim per microsecond).
"""

from __future__ import annotations

from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, Finding
from tracelake.analyzers.job_common import JobContext, impact, inline, job_finding, result, rows
from tracelake.analyzers.job_queries import STEP_ENTRY_SQL, STRAGGLER_SQL, WHY_LATE_SQL

AGENT_NAME = "job_straggler"
DISPLAY_NAME = "Straggler"


def straggler_row(db: duckdb.DuckDBPyConnection, job_id: str) -> dict[str, Any] | None:
    """The STRAGGLER_SQL row when it names a straggler by the settings, else None."""
    found = rows(db, inline(STRAGGLER_SQL, job_id))
    if not found:
        return None
    row = found[0]
    if (int(row["num_collectives"] or 0) < settings.STRAGGLER_MIN_COLLECTIVES
            or float(row["pct_arrived_last"] or 0.0) < settings.STRAGGLER_LAST_ARRIVAL_PERCENT_MIN
            or int(row["times_arrived_last"]) <= int(row["runner_up_times_last"])):
        return None
    return row


def why_late_rows(db: duckdb.DuckDBPyConnection, job_id: str, rank: int) -> tuple[str, list[dict[str, Any]]]:
    """(the query, its rows): the straggler's ops beyond the median rank before its late collectives."""
    sql = inline(WHY_LATE_SQL, job_id, rank)
    return sql, rows(db, sql)


def step_entry(db: duckdb.DuckDBPyConnection, job_id: str, rank: int, named: list[dict[str, Any]]) -> dict[str, Any]:
    """When the straggler enters its profiled step against the median rank, and whether that is where
    its late start comes from (settings.WHY_LATE_BEFORE_STEP_SHARE of the late-start part)."""
    found = rows(db, inline(STEP_ENTRY_SQL, job_id, rank))
    lag_us = None if not found or found[0]["entry_lag_us"] is None else float(found[0]["entry_lag_us"])
    steps = int(found[0]["profiled_steps"] or 0) if found else 0
    late_start = next((p["excess_ms"] for p in named if p["kind"] == "window_start"), None)
    before = (lag_us is not None and late_start is not None and late_start > 0
              and lag_us / 1000.0 >= settings.WHY_LATE_BEFORE_STEP_SHARE * late_start)
    return {"entry_lag_ms": None if lag_us is None else lag_us / 1000.0, "profiled_steps": steps,
            "late_before_step": before}


def _part(row: dict[str, Any]) -> dict[str, Any]:
    return {"kind": row["kind"], "op": row["name"] or None, "module": row["module"] or None,
            "straggler_ms": float(row["straggler_us"]) / 1000.0, "median_ms": float(row["median_rank_us"]) / 1000.0,
            "excess_ms": float(row["excess_us"]) / 1000.0}


def named_parts(parts: list[dict[str, Any]], others_wait_us: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the parts of the straggler's arrival that explain its lateness: a late window start, GPU work
    by op, GPU idle, each at least settings.WHY_LATE_MIN_SHARE of what the others wait, at most
    settings.WHY_LATE_TOP_OPS; the host's root ops that ran longer meanwhile, when GPU idle is named)."""
    floor = settings.WHY_LATE_MIN_SHARE * others_wait_us
    named = [_part(r) for r in parts if r["kind"] != "host" and float(r["excess_us"]) >= floor]
    named = named[: settings.WHY_LATE_TOP_OPS]
    host = ([_part(r) for r in parts if r["kind"] == "host"][: settings.WHY_LATE_TOP_OPS]
            if any(p["kind"] == "gpu_idle" for p in named) else [])
    return named, host


def _straggler_values(row: dict[str, Any], ctx: JobContext, named: list[dict[str, Any]],
                      host: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "job_id": ctx.job_id, "rank": int(row["rank"]), "node_id": row["node_id"],
        "times_last": int(row["times_arrived_last"]), "collectives": int(row["num_collectives"]),
        "pct_last": float(row["pct_arrived_last"]), "straggler_wait_ms": float(row["straggler_wait_us"]) / 1000.0,
        "late_collectives": int(row["late_collectives"]), "others_wait_ms": float(row["others_wait_us"]) / 1000.0,
        "lead_ms": float(row["lead_over_next_us"]) / 1000.0,
        "others_exposed_ms": None if row["others_exposed_comm_us"] is None else float(row["others_exposed_comm_us"]) / 1000.0,
        "recoverable_ms": float(row["recoverable_us"]) / 1000.0, "job_step_ms": ctx.job_step_ms,
        "pct_of_step": float(row["recoverable_pct_of_step"] or 0.0), "parts": named, "host": host,
        "rank_count": ctx.rank_count,
    }


def analyze(db: duckdb.DuckDBPyConnection, ctx: JobContext) -> AgentResult:
    """The straggler finding and, when its work explains it, the why-late finding."""
    row = straggler_row(db, ctx.job_id)
    if row is None:
        return result(AGENT_NAME, [])
    rank = int(row["rank"])
    why_sql, parts = why_late_rows(db, ctx.job_id, rank)
    named, host = named_parts(parts, float(row["others_wait_us"]))
    values = {**_straggler_values(row, ctx, named, host), **step_entry(db, ctx.job_id, rank, named)}
    operations = [p["op"] for p in named + host if p["op"]]
    straggler = job_finding(
        AGENT_NAME, f"rank-{rank}", "straggler", values, evidence_sql=inline(STRAGGLER_SQL, ctx.job_id),
        confidence="high" if ctx.clock_method != "unaligned" else "low",
        fields={**impact(float(row["recoverable_us"]), ctx), "operations": operations})
    found: list[Finding] = [straggler]
    if parts:
        found.append(job_finding(
            AGENT_NAME, f"why-rank-{rank}", "why_late", values, evidence_sql=why_sql, confidence="medium",
            fields={"estimate_method": "qualitative", "operations": operations}))
    return result(AGENT_NAME, found, {"straggler_rank": rank, **{k: v for k, v in values.items() if k not in ("parts", "host")}})
