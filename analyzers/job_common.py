"""What every job analyzer shares: the job's context, its queries run with their values inlined (the
printed evidence is the query that ran), and a finding built from a row of analyzers/advice/job.toml.

A job finding is a `Finding` (analyzers/contracts.py) like a trace's: its impact is % of the job's
step time (the slowest rank's span), its recoverable time in ms, so reports/priority.py ranks them.
Job findings claim no kernels in the per-trace ledger (finding_kernels is per trace); they are kept
disjoint by what they count instead: the straggler counts the others' waiting, the bandwidth finding
the fastest rank's transfer time, the overlap finding exposed time less waiting.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers.contracts import AdviceText, AgentResult, Confidence, EstimateMethod, Finding, Tier
from tracelake.analyzers.finding_text import render_part
from tracelake.core.sql_text import sql_literal

ADVICE_TABLE = "job"
TIER: Tier = "system"


class JobContext(BaseModel):
    """The job a job analyzer reads (docs/jobs.md `jobs` row) and the denominator of its impacts."""

    job_id: str
    world_size: int
    rank_count: int
    missing_ranks: list[int]
    node_count: int
    platforms: list[str]
    clock_method: str
    clock_uncertainty_us: float | None
    job_step_ms: float  # the slowest rank's span: every impact is % of it


def inline(sql: str, *values: Any) -> str:
    """The query with its `?` placeholders replaced, in order, by the values as SQL literals."""
    text = sql
    for value in values:
        head, sep, tail = text.partition("?")
        if not sep:
            raise ValueError("more values than placeholders in the query")
        if isinstance(value, float):
            literal = repr(value)
        elif isinstance(value, str):
            literal = sql_literal(value)
        else:
            literal = str(int(value))
        text = head + literal + tail
    if "?" in text:
        raise ValueError("a placeholder of the query has no value")
    return text.strip()


def rows(db: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    """The rows of an inlined query, as dicts (DECIMAL values as floats)."""
    cursor = db.execute(sql)
    names = [d[0] for d in cursor.description or []]
    return [{name: float(value) if isinstance(value, Decimal) else value for name, value in zip(names, row, strict=True)}
            for row in cursor.fetchall()]


def impact(recoverable_us: float, ctx: JobContext, method: EstimateMethod = "quantified") -> dict[str, Any]:
    """The impact fields of a finding that recovers `recoverable_us` of the job's step: the mid
    estimate is the modelled time; low and high are the same time (a job finding's model is its
    measured wait or transfer time, not a range of fractions)."""
    share = 100.0 * recoverable_us / (1000.0 * ctx.job_step_ms) if ctx.job_step_ms > 0 else 0.0
    return {"impact_low": round(share, 4), "impact_score": round(share, 4), "impact_high": round(share, 4),
            "recoverable_ms": round(recoverable_us / 1000.0, 4), "estimate_method": method}


def job_finding(agent: str, slug: str, fact: str, values: dict[str, Any], *, evidence_sql: str,
                confidence: Confidence, fields: dict[str, Any]) -> Finding:
    """A finding worded by the `fact` row of analyzers/advice/job.toml (title, insight, action, details)."""
    text = AdviceText(agent=ADVICE_TABLE, fact=fact, values=values)
    return Finding(
        finding_id=f"{agent}:{slug}", agent=agent, tier=TIER, category=agent,
        title=render_part(text, "title").strip(), insight=render_part(text, "insight").strip(),
        action=render_part(text, "action").strip(), details=render_part(text, "details").strip(),
        confidence=confidence, evidence={k: v for k, v in values.items() if _plain(v)},
        evidence_sql=evidence_sql, **fields)


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool) or (
        isinstance(value, list | tuple) and all(_plain(v) for v in value)) or (
        isinstance(value, dict) and all(_plain(v) for v in value.values()))


def result(agent: str, found: list[Finding], metrics: dict[str, Any] | None = None) -> AgentResult:
    return AgentResult(agent=agent, tier=TIER, category=agent, status="OK" if found else "NO_DATA",
                       metrics=metrics or {}, findings=found)
