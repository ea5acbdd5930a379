"""Step 8.5: every agent's findings in one globally ranked list (priority_data.json)."""

from __future__ import annotations

from collections import defaultdict

from analyzers import settings
from analyzers.contracts import AgentResult, AnalysisContext, CategoryPriority, PriorityData, RankedFinding


def rank_findings(results: list[AgentResult]) -> list[RankedFinding]:
    """Quantified and heuristic findings by impact (mid), then qualitative ones; ranks 1..n."""
    findings = [f for r in results if r.status == "OK" for f in r.findings]
    scored = sorted((f for f in findings if f.impact_score is not None), key=lambda f: (-f.impact_score, f.finding_id))
    unscored = sorted((f for f in findings if f.impact_score is None), key=lambda f: f.finding_id)
    return [
        RankedFinding(**finding.model_dump(), global_rank=rank)
        for rank, finding in enumerate([*scored, *unscored], start=1)
    ]


def category_priorities(
    results: list[AgentResult], category_time_ms: dict[str, float], ctx: AnalysisContext
) -> list[CategoryPriority]:
    """Per category, the summed quantified impact (heuristics never inflate projected savings),
    top ones first; compute categories with no finding but a large share of compute time are
    listed after them with no score."""
    quantified: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    tiers = {r.category: r.tier for r in results}
    for result in results:
        for finding in result.findings:
            counts[result.category] += 1
            if finding.estimate_method == "quantified" and finding.impact_score is not None:
                quantified[result.category] += finding.impact_score
    ranked = sorted(quantified.items(), key=lambda item: -item[1])[: settings.MAX_CATEGORY_PRIORITIES]
    priorities = [
        CategoryPriority(category=c, tier=tiers[c], impact_score=round(score, 4), finding_count=counts[c])
        for c, score in ranked
    ]
    listed = {p.category for p in priorities}
    for result in results:
        share = 100.0 * category_time_ms.get(result.category, 0.0) / ctx.computation_time_ms if ctx.computation_time_ms else 0.0
        if result.tier == "compute" and result.category not in listed and counts[result.category] == 0 \
                and share >= settings.UNMODELED_CATEGORY_MIN_PERCENT:
            priorities.append(CategoryPriority(category=result.category, tier="compute", impact_score=None,
                                               finding_count=0, source="manifest_fallback"))
    return priorities


def build_priority_data(
    results: list[AgentResult], category_time_ms: dict[str, float], ctx: AnalysisContext
) -> PriorityData:
    return PriorityData(
        trace_id=ctx.trace_id,
        comparison_scope=ctx.comparison_scope,
        e2e_time_ms=ctx.e2e_time_ms,
        findings=rank_findings(results),
        priorities=category_priorities(results, category_time_ms, ctx),
    )
