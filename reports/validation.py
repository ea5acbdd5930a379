"""Step 9: check the agents' outputs before they reach the report (metadata/validation.json)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, PriorityData
from tracelake.reports.priority import rank_order

Verdict = Literal["PASS", "WARN", "FAIL"]


class ValidationCheck(BaseModel):
    name: str
    verdict: Verdict
    detail: str


class ValidationReport(BaseModel):
    checks: list[ValidationCheck]

    @property
    def problems(self) -> list[str]:
        return [f"{c.name}: {c.detail}" for c in self.checks if c.verdict != "PASS"]


def time_sanity(category_time_ms: dict[str, float], ctx: AnalysisContext) -> ValidationCheck:
    """The categories' kernel time may not exceed the GPU's computation + exposed time."""
    total = sum(category_time_ms.values())
    busy_ceiling = ctx.e2e_time_ms
    if total <= busy_ceiling * (1 + settings.CATEGORY_TIME_TOLERANCE):
        return ValidationCheck(name="time_sanity", verdict="PASS",
                               detail=f"categories sum to {total:.3f} ms within the {ctx.e2e_time_ms:.3f} ms trace")
    return ValidationCheck(name="time_sanity", verdict="WARN",
                           detail=f"categories sum to {total:.3f} ms, more than the {ctx.e2e_time_ms:.3f} ms trace "
                                  "(overlapping streams)")


def efficiency_anomalies(anomalous_ops: list[tuple[str, float]], ctx: AnalysisContext) -> ValidationCheck:
    if ctx.comparison_scope != "standalone" or not anomalous_ops:
        return ValidationCheck(name="efficiency_anomalies", verdict="PASS", detail="no op above 100 % of its roofline")
    listed = ", ".join(f"{name} ({pct:.0f} %)" for name, pct in anomalous_ops[:5])
    if ctx.roofline_assumed:
        return ValidationCheck(name="efficiency_anomalies", verdict="WARN",
                               detail=f"{len(anomalous_ops)} op signatures run above 100 % of the {ctx.platform} "
                                      f"roofline, assumed (the trace names no device the seed knows): {listed}; "
                                      "pass --platform with the trace's GPU")
    return ValidationCheck(name="efficiency_anomalies", verdict="WARN",
                           detail=f"{len(anomalous_ops)} op signatures run above 100 % of the roofline: {listed}; "
                                  "check the platform choice or the perf model")


def coverage(results: list[AgentResult]) -> ValidationCheck:
    failed = [r.agent for r in results if r.status == "ERROR"]
    if failed:
        return ValidationCheck(name="coverage", verdict="FAIL", detail=f"agents failed: {', '.join(failed)}")
    return ValidationCheck(name="coverage", verdict="PASS", detail=f"all {len(results)} agents produced a result")


def priority_consistency(priority: PriorityData) -> ValidationCheck:
    ranks = [f.global_rank for f in priority.findings]
    problems = []
    if ranks != list(range(1, len(ranks) + 1)):
        problems.append("global ranks are not contiguous from 1")
    if [f.finding_id for f in rank_order(priority.findings)] != [f.finding_id for f in priority.findings]:
        problems.append("findings are not in rank order (impact, heuristics below quantified findings of more time)")
    for finding in priority.findings:
        if finding.impact_score is not None and not (
            (finding.impact_low or 0) - 1e-9 <= finding.impact_score <= (finding.impact_high or finding.impact_score) + 1e-9
        ):
            problems.append(f"{finding.finding_id}: impact mid outside low..high")
    if problems:
        return ValidationCheck(name="priority_consistency", verdict="FAIL", detail="; ".join(problems))
    return ValidationCheck(name="priority_consistency", verdict="PASS", detail=f"{len(ranks)} findings ranked 1..{len(ranks)}")


def validate(
    results: list[AgentResult], priority: PriorityData, category_time_ms: dict[str, float],
    anomalous_ops: list[tuple[str, float]], ctx: AnalysisContext,
) -> ValidationReport:
    return ValidationReport(checks=[
        time_sanity(category_time_ms, ctx),
        efficiency_anomalies(anomalous_ops, ctx),
        coverage(results),
        priority_consistency(priority),
    ])
