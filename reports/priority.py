"""Step 8.5: every agent's findings in one globally ranked list (priority_data.json)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import (
    AgentResult,
    AnalysisContext,
    CategoryPriority,
    Finding,
    PriorityData,
    RankedFinding,
    ReplaySummary,
    UnaddressedOp,
)


def _heuristics_below_larger_measured(ordered: list[Finding]) -> list[Finding]:
    """A heuristic (unmodelled) estimate never ranks above a quantified finding that owns more
    GPU time: its percentage is a guess, the other's a model of more measured time."""
    order = list(ordered)
    moved = True
    while moved:
        moved = False
        for i, finding in enumerate(order):
            if finding.estimate_method != "heuristic":
                continue
            measured = finding.claimed_time_ms or 0.0
            larger = [j for j in range(i + 1, len(order)) if order[j].estimate_method == "quantified"
                      and (order[j].claimed_time_ms or 0.0) > measured]
            if larger:
                order.insert(larger[-1], order.pop(i))
                moved = True
                break
    return order


def rank_findings(results: list[AgentResult]) -> list[RankedFinding]:
    """Quantified and heuristic findings by impact (mid), heuristic ones never above a quantified
    one of more claimed time, then qualitative ones; ranks 1..n."""
    findings = [f for r in results if r.status == "OK" for f in r.findings]
    return [RankedFinding(**finding.model_dump(), global_rank=rank)
            for rank, finding in enumerate(rank_order(findings), start=1)]


def rank_order(findings: Sequence[Finding]) -> list[Finding]:
    """Estimated findings by impact (mid), a heuristic one never above a quantified one that owns
    more GPU time, then the unestimated ones."""
    scored = _heuristics_below_larger_measured(
        sorted((f for f in findings if f.impact_score is not None), key=lambda f: (-(f.impact_score or 0.0), f.finding_id)))
    unscored = sorted((f for f in findings if f.impact_score is None), key=lambda f: f.finding_id)
    return [*_after_their_enablers(scored), *unscored]


def _after_their_enablers(ordered: list[Finding]) -> list[Finding]:
    """A finding realisable only after another (the replay's sequencing) ranks below that one: the
    enabler moves up to just above the first finding it releases, since what it pays off includes
    what it releases (the order the changes pay off in, not only each one's own saving)."""
    order = list(ordered)
    for finding in list(order):
        ids = [f.finding_id for f in order]
        if finding.realisable_after in ids and ids.index(finding.realisable_after) > ids.index(finding.finding_id):
            enabler = order.pop(ids.index(finding.realisable_after))
            order.insert(ids.index(finding.finding_id), enabler)
    return order


def category_priorities(
    results: list[AgentResult], ranked: list[RankedFinding], category_time_ms: dict[str, float], ctx: AnalysisContext
) -> list[CategoryPriority]:
    """Every category with a scored finding, system and compute tiers alike, in the order of its
    best-ranked finding (so the first category is P1's); its score is the sum of its findings'
    mid estimates (they add up: no GPU event or idle gap counts twice), its quantified part
    apart. Compute categories with no finding but a large share of compute time follow, with no
    score."""
    tiers = {r.category: r.tier for r in results}
    counts: dict[str, int] = defaultdict(int)
    for finding in ranked:
        counts[finding.category] += 1
    scores: dict[str, float] = defaultdict(float)
    quantified: dict[str, float] = defaultdict(float)
    order: list[str] = []
    for finding in ranked:
        if finding.impact_score is None:
            continue
        if finding.category not in scores:
            order.append(finding.category)
        scores[finding.category] += finding.impact_score
        if finding.estimate_method == "quantified":
            quantified[finding.category] += finding.impact_score
    priorities = [
        CategoryPriority(category=c, tier=tiers.get(c, "compute"), impact_score=round(scores[c], 4),
                         quantified_score=round(quantified[c], 4), finding_count=counts[c])
        for c in order[: settings.MAX_CATEGORY_PRIORITIES]
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
    results: list[AgentResult], category_time_ms: dict[str, float], ctx: AnalysisContext,
    unaddressed: list[UnaddressedOp] | None = None, near_roofline: list[str] | None = None,
    replay: ReplaySummary | None = None,
) -> PriorityData:
    ranked = rank_findings(results)
    return PriorityData(
        trace_id=ctx.trace_id,
        comparison_scope=ctx.comparison_scope,
        e2e_time_ms=ctx.e2e_time_ms,
        findings=ranked,
        priorities=category_priorities(results, ranked, category_time_ms, ctx),
        unaddressed_ops=unaddressed or [],
        near_roofline=near_roofline or [],
        replay=replay,
    )


def finding_lines(priority: PriorityData, count: int) -> list[str]:
    """The first `count` findings, one line each: `P<n>  <impact range>  <title>` (tab-free, so the
    lines split on two spaces)."""
    ranked = sorted(priority.findings, key=lambda f: f.global_rank)[:count]
    return [f"P{f.global_rank}  {_impact_range(f, priority.e2e_time_ms)}  {' '.join(f.title.split())}" for f in ranked]


def _impact_range(finding: RankedFinding, e2e_ms: float | None) -> str:
    if finding.impact_score is None:
        return f"not quantified ({finding.estimate_method})"
    low = finding.impact_low if finding.impact_low is not None else finding.impact_score
    high = finding.impact_high if finding.impact_high is not None else finding.impact_score
    span = f"{low:.1f}-{high:.1f} % of E2E"
    return f"{span} ({low * e2e_ms / 100:.3f}-{high * e2e_ms / 100:.3f} ms)" if e2e_ms else span
