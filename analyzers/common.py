"""Small helpers every analyzer uses: rows as dicts, the gpu_timeline row, empty results.

SQL quoting lives in core.sql_text and confidence in analyzers.confidence; `inline_trace_id` and
`confidence_from_quality` are importable from here too, for the analyzers that still import them
from this module."""

from __future__ import annotations

import math
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.confidence import confidence_from_quality as confidence_from_quality
from tracelake.analyzers.contracts import AgentResult, Tier
from tracelake.core.sql_text import inline_trace_id as inline_trace_id


def query_rows(db: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = db.execute(sql, params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


NO_GPU_TIMELINE = "the trace has no linked GPU time (no gpu_timeline row)"


def gpu_timeline_row(db: duckdb.DuckDBPyConnection, sql: str, trace_id: str) -> dict[str, Any] | None:
    """The trace's gpu_timeline row as `sql` selects it (one `?`: the trace id); None without GPU time."""
    rows = query_rows(db, sql, [trace_id])
    return rows[0] if rows and rows[0]["total_time_ms"] else None


def no_data_result(agent: str, tier: Tier, reason: str) -> AgentResult:
    return AgentResult(agent=agent, tier=tier, category=agent, status="NO_DATA", error=reason)


def _nearest(bands: tuple[tuple[int, float, float], ...], value: int) -> tuple[int, float, float]:
    return min(bands, key=lambda band: abs(math.log(max(value, 1)) - math.log(band[0])))


def expected_attention_band(n: int, head_dim: int | None = None) -> tuple[int, float, float]:
    """The fused-attention efficiency band (anchor N, low %, high % of roofline): the sequence-length
    band whose anchor is nearest to n on a log scale (TraceLens sdpa spec), capped by what fused
    attention reaches at the nearest head dim (settings.EXPECTED_EFFICIENCY_BY_HEAD_DIM)."""
    anchor, low, high = _nearest(settings.EXPECTED_EFFICIENCY_BY_SEQ_LEN, n)
    if head_dim:
        _, cap_low, cap_high = _nearest(settings.EXPECTED_EFFICIENCY_BY_HEAD_DIM, head_dim)
        low, high = min(low, cap_low), min(high, cap_high)
    return anchor, low, high
