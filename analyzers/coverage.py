"""Nothing big left unsaid: every op signature above BIG_OP_PERCENT_OF_E2E of E2E that runs below
its attainable share of the roofline is claimed by a finding, or is listed with the reason none
claims it. Read after the claims ledger (the findings' owned GPU events)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.compute import OpRecord, near_roofline_summary, reaches_attainable
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext, UnaddressedOp
from tracelake.analyzers.finding_text import render_part

# The op signatures above the share, with the GPU events their instances own (op_perf_kernels).
_BIG_OPS_SQL = """
select p.signature_key, p.name, p.op_category, p.kernel_time_sum_us / 1000.0 as time_ms,
    p.pct_roofline_mean as efficiency_percent, p.has_perf_model,
    list(k.event_idx) as event_ids, list(k.dur_us) as durations
from op_perf as p
join op_perf_kernels as k
    on k.trace_id = p.trace_id and k.platform = p.platform and k.signature_key = p.signature_key
where p.trace_id = $trace_id and p.platform = $platform
    and p.kernel_time_sum_us / 1000.0 >= $min_ms
group by all
order by time_ms desc, p.signature_key
"""


# The GPU events behind some op signatures.
_SIGNATURE_EVENTS_SQL = """
select signature_key, list(event_idx) as event_ids, list(dur_us) as durations
from op_perf_kernels
where trace_id = $trace_id and platform = $platform and list_contains($keys, signature_key)
group by signature_key
"""


def _claimed(results: Sequence[AgentResult]) -> dict[int, float]:
    """event_idx -> µs some finding owns (after the claims ledger)."""
    claimed: dict[int, float] = {}
    for result in results:
        for finding in result.findings:
            for event, us in finding.claimed_kernels.items():
                claimed[event] = claimed.get(event, 0.0) + us
    return claimed


def _claimed_share(events: Sequence[int], durations: Sequence[float], claimed: dict[int, float]) -> float:
    total = sum(durations)
    owned = sum(min(claimed.get(e, 0.0), d) for e, d in zip(events, durations))
    return owned / total if total > 0 else 0.0


def near_roofline_lines(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext,
                        results: Sequence[AgentResult]) -> list[str]:
    """Per compute agent, one line on its modelled ops at or above their attainable roofline share
    that no finding claims (a fusion finding that removes an op's kernels owns them, so the op is
    not "fine" there)."""
    claimed = _claimed(results)
    lines = []
    for result in results:
        near = result.metrics.get("near_roofline") if result.tier == "compute" and result.status == "OK" else None
        if not near:
            continue
        fine = [op for op in (OpRecord.model_validate(o) for o in result.metrics.get("operations") or [])
                if op.is_near_roofline]
        params = {"trace_id": ctx.trace_id, "platform": ctx.platform, "keys": [op.signature_key for op in fine]}
        events = {key: (ids, durs) for key, ids, durs in db.execute(_SIGNATURE_EVENTS_SQL, params).fetchall()}
        unclaimed = [op for op in fine
                     if _claimed_share(*events.get(op.signature_key, ([], [])), claimed) < settings.BIG_OP_MIN_CLAIMED_SHARE]
        summary = near_roofline_summary(unclaimed, near["noun"], ctx.e2e_time_ms)
        if summary is not None:
            lines.append(summary.sentence)
    return lines


def _op_records(results: Sequence[AgentResult]) -> dict[str, tuple[str, dict[str, Any]]]:
    """signature_key -> (agent, the op as that compute agent saw it)."""
    records: dict[str, tuple[str, dict[str, Any]]] = {}
    for result in results:
        if result.tier != "compute" or result.status != "OK":
            continue
        for op in result.metrics.get("operations") or []:
            records.setdefault(op["signature_key"], (result.agent, op))
    return records


def _reason(agent_op: tuple[str, dict[str, Any]] | None, ctx: AnalysisContext, efficiency: float | None) -> str:
    """Why no finding claims the op: a row of analyzers/advice/coverage.toml, rendered."""
    return render_part(_reason_text(agent_op, ctx, efficiency), "reason")


def _reason_text(agent_op: tuple[str, dict[str, Any]] | None, ctx: AnalysisContext,
                 efficiency: float | None) -> AdviceText:
    if agent_op is None:
        return AdviceText(agent="coverage", fact="no_agent")
    agent, op = agent_op
    if op.get("excluded"):
        return AdviceText(agent="coverage", fact="excluded", values={"agent": agent, "exclusion": op["excluded"]})
    if op["name"] in ctx.fusion_flagged_ops:
        return AdviceText(agent="coverage", fact="fusion_candidate",
                          values={"candidate": ctx.fusion_flagged_ops[op["name"]]})
    if efficiency is not None and efficiency > settings.EFFICIENCY_ANOMALY_PERCENT:
        return AdviceText(agent="coverage", fact="measurement_anomaly", values={"efficiency": efficiency})
    if op.get("impact") is None:
        return AdviceText(agent="coverage", fact="no_estimate", values={"agent": agent})
    return AdviceText(agent="coverage", fact="below_reporting_floor",
                      values={"agent": agent, "impact_mid": op["impact"]["mid"]})


def unaddressed_ops(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext,
                    results: Sequence[AgentResult]) -> list[UnaddressedOp]:
    if ctx.e2e_time_ms <= 0 or not any(r.tier == "compute" and r.status == "OK" for r in results):
        return []  # no op-level analysis ran (GPU-only trace, comparative gaps): nothing to hold it to
    claimed = _claimed(results)
    records = _op_records(results)
    params = {"trace_id": ctx.trace_id, "platform": ctx.platform,
              "min_ms": settings.BIG_OP_PERCENT_OF_E2E * ctx.e2e_time_ms / 100.0}
    found = []
    for key, name, category, time_ms, efficiency, has_model, events, durations in db.execute(_BIG_OPS_SQL, params).fetchall():
        agent_op = records.get(key)
        attainable = agent_op[1].get("attainable_percent", settings.ATTAINABLE_ROOFLINE_PERCENT) if agent_op else \
            settings.ATTAINABLE_ROOFLINE_PERCENT
        if reaches_attainable(has_model, efficiency, attainable):
            continue  # near what the GPU reaches: the "fine" line says so
        share = _claimed_share(events, durations, claimed)
        if share >= settings.BIG_OP_MIN_CLAIMED_SHARE:
            continue
        found.append(UnaddressedOp(
            signature_key=key, name=name, op_category=category, time_ms=time_ms,
            percent_of_e2e=100.0 * time_ms / ctx.e2e_time_ms, efficiency_percent=efficiency,
            claimed_share=share, reason=_reason(agent_op, ctx, efficiency)))
    return found
