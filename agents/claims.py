"""The claims ledger: each GPU event and each GPU idle gap counts in at most one finding of a
report, so the findings' times and recoverable estimates add up.

Analyzers give every finding its candidate claims (Finding.claimed_kernels / claimed_gaps).
Here the findings are visited in claim precedence (analyzers/settings.py CLAIM_METHOD_ORDER and
CLAIM_AGENT_ORDER, then the larger estimate); each takes the candidates no earlier finding took.
A finding's estimate is scaled to the share of its candidate time it owns (its estimate was
computed over all of them) and capped at the time it owns; one left with nothing (or with an
estimate below the agents' floor, MIN_PITEM_IMPACT_SCORE) is dropped and named in the details
of the finding that owns most of its time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, Finding
from tracelake.core.sql_text import sql_literal

US_PER_MS = 1000.0


@dataclass(frozen=True)
class Ceded:
    """Candidate time of one finding that an earlier finding owns."""

    finding: Finding
    owner_id: str
    ms: float
    events: int


def _precedence(finding: Finding) -> tuple[int, int, float, str]:
    method = settings.CLAIM_METHOD_ORDER.index(finding.estimate_method)
    order = settings.CLAIM_AGENT_ORDER
    agent = order.index(finding.agent) if finding.agent in order else len(order)
    return method, agent, -(finding.impact_score or 0.0), finding.finding_id


def _candidates(finding: Finding) -> float:
    return sum(finding.claimed_kernels.values()) + sum(finding.claimed_gaps.values())


def _owned_view(finding: Finding, kernels: dict[int, float], gaps: dict[int, float], e2e_ms: float,
                ceded_to: dict[str, float]) -> Finding:
    """`finding` with only the claims it owns, its estimate rescaled to them."""
    candidate_us = _candidates(finding)
    owned_us = sum(kernels.values()) + sum(gaps.values())
    claimed_ms = owned_us / US_PER_MS
    update: dict[str, object] = {
        "claimed_kernels": kernels, "claimed_gaps": gaps, "claimed_time_ms": claimed_ms,
        "claimed_kernel_count": len(kernels), "claimed_gap_count": len(gaps), "ceded_to": ceded_to,
    }
    if finding.impact_score is not None and candidate_us > 0 and e2e_ms > 0:
        share = owned_us / candidate_us
        cap = 100.0 * claimed_ms / e2e_ms  # nothing recovers more time than the finding owns
        high = min((finding.impact_high if finding.impact_high is not None else finding.impact_score) * share, cap)
        mid = min(finding.impact_score * share, high)
        low = min((finding.impact_low if finding.impact_low is not None else finding.impact_score) * share, mid)
        update.update(impact_low=low, impact_score=mid, impact_high=high, recoverable_ms=mid * e2e_ms / 100.0)
        if share < 1.0 - 1e-9 or high < (finding.impact_high or 0.0) - 1e-9:
            update["details"] = finding.details + (
                f"\n\n**Claims ledger:** this finding owns {claimed_ms:.3f} of the {candidate_us / US_PER_MS:.3f} ms of "
                f"GPU time its estimate was made over (the rest is counted in another finding), so the estimate "
                f"above ({_range(finding.impact_low, finding.impact_high)} % of E2E) becomes that share, capped at the "
                f"time it owns: {_range(low, high)} % of E2E ({low * e2e_ms / 100.0:.3f}-{high * e2e_ms / 100.0:.3f} ms), "
                "as the card says.")
    return finding.model_copy(update=update)


def _range(low: float | None, high: float | None) -> str:
    return f"{low or 0.0:.2f}-{high or 0.0:.2f}"


def _unowned(candidates: dict[int, float], owners: dict[int, str], ceded: dict[str, float]) -> dict[int, float]:
    """The candidates no earlier finding owns; the ms of the others are added to `ceded` by owner."""
    free: dict[int, float] = {}
    for key, us in candidates.items():
        owner = owners.get(key)
        if owner is None:
            free[key] = us
        else:
            ceded[owner] += us / US_PER_MS
    return free


def _too_small_once_shared(found: Finding, owned: Finding) -> bool:
    """A finding the agents kept (at least MIN_PITEM_IMPACT_SCORE) that falls below that floor
    once the time other findings own is taken out: what is left is not worth a P item."""
    floor = settings.MIN_PITEM_IMPACT_SCORE
    return (found.impact_score is not None and owned.impact_score is not None
            and found.impact_score >= floor > owned.impact_score)


def _ceded_sentence(owned: Finding, ceded: dict[str, float], titles: dict[str, str]) -> str:
    parts = [f"{ms:.3f} ms under '{titles[owner]}'" for owner, ms in sorted(ceded.items(), key=lambda i: -i[1])]
    return (f" Part of the GPU time this finding found is counted in another finding ({'; '.join(parts)}); "
            f"its estimate covers the {owned.claimed_time_ms or 0.0:.3f} ms it owns.")


def assign_claims(results: list[AgentResult], e2e_ms: float) -> list[AgentResult]:
    """The results with every finding reduced to the claims it owns (see the module docstring)."""
    findings = [f for r in results if r.status == "OK" for f in r.findings]
    owner_of_kernel: dict[int, str] = {}
    owner_of_gap: dict[int, str] = {}
    kept: dict[str, Finding] = {}
    dropped: list[Ceded] = []
    titles = {f.finding_id: f.title for f in findings}
    for finding in sorted(findings, key=_precedence):
        if not finding.claimed_kernels and not finding.claimed_gaps:
            kept[finding.finding_id] = finding
            continue
        ceded: dict[str, float] = defaultdict(float)
        kernels = _unowned(finding.claimed_kernels, owner_of_kernel, ceded)
        gaps = _unowned(finding.claimed_gaps, owner_of_gap, ceded)
        owned = _owned_view(finding, kernels, gaps, e2e_ms, dict(ceded)) if kernels or gaps else None
        if owned is None or (ceded and _too_small_once_shared(finding, owned)):
            owner_id = max(ceded, key=ceded.__getitem__)
            events = len(finding.claimed_kernels) + len(finding.claimed_gaps)
            dropped.append(Ceded(finding, owner_id, sum(ceded.values()), events))
            continue
        owner_of_kernel.update(dict.fromkeys(kernels, finding.finding_id))
        owner_of_gap.update(dict.fromkeys(gaps, finding.finding_id))
        if ceded:
            owned = owned.model_copy(update={"insight": owned.insight + _ceded_sentence(owned, ceded, titles)})
        kept[finding.finding_id] = owned
    for loss in dropped:
        owner = kept[loss.owner_id]
        note = (f"\n\n**Overlap:** the {loss.finding.agent} agent's finding '{loss.finding.title}' rests on the "
                f"same GPU time ({loss.ms:.3f} ms, {loss.events} GPU events or gaps); it is counted here once and "
                "not listed on its own.")
        kept[loss.owner_id] = owner.model_copy(update={"details": owner.details + note})
    return [r.model_copy(update={"findings": [kept[f.finding_id] for f in r.findings if f.finding_id in kept]})
            for r in results]


def ledger_sql(finding: Finding, trace_id: str, trace2_id: str | None) -> str:
    """The query over the claims ledger that returns the finding's printed claim and estimate."""
    def scope(alias: str) -> str:
        trace2 = sql_literal(trace2_id) if trace2_id else "null"
        return (f"{alias}trace_id = {sql_literal(trace_id)} and {alias}finding_id = {sql_literal(finding.finding_id)} "
                f"and {alias}trace2_id is not distinct from {trace2}")

    return (
        "with claims as (\n"
        "    select 'gpu_event' as kind, c.claimed_us\n"
        "    from finding_kernels as c\n"
        "    inner join kernels as k on k.trace_id = c.trace_id and k.event_idx = c.event_idx\n"
        f"    where {scope('c.')}\n"
        "    union all\n"
        "    select 'idle_gap' as kind, c.claimed_us\n"
        "    from finding_gaps as c\n"
        "    inner join gpu_idle_gaps as g on g.trace_id = c.trace_id and g.gap_id = c.gap_id\n"
        f"    where {scope('c.')}\n"
        ")\n"
        "select count(*) filter (where kind = 'gpu_event') as gpu_events,\n"
        "    count(*) filter (where kind = 'idle_gap') as idle_gaps,\n"
        "    round(sum(claimed_us) / 1000.0, 3) as claimed_ms,\n"
        "    round(any_value(f.recoverable_ms), 3) as recoverable_ms,\n"
        "    round(100.0 * sum(claimed_us) / 1000.0 / any_value(e.e2e_time_ms), 3) as claimed_percent_of_e2e,\n"
        "    round(100.0 * any_value(f.recoverable_ms) / any_value(e.e2e_time_ms), 3) as recoverable_percent_of_e2e\n"
        "from claims\n"
        f"cross join (select recoverable_ms from findings where {scope('')}) as f\n"
        # the report's E2E: the timeline less the idle at the profile window's edges
        "cross join (select analysis_window_ms as e2e_time_ms from workload_facts "
        f"where trace_id = {sql_literal(trace_id)}) as e"
    )


def with_ledger_sql(results: list[AgentResult], trace_id: str, trace2_id: str | None) -> list[AgentResult]:
    """Each claiming finding's evidence_sql becomes its ledger query; the analyzer's own query
    moves to analysis_sql."""
    def swap(finding: Finding) -> Finding:
        if finding.claimed_time_ms is None:
            return finding
        return finding.model_copy(update={"analysis_sql": finding.evidence_sql,
                                          "evidence_sql": ledger_sql(finding, trace_id, trace2_id)})
    return [r.model_copy(update={"findings": [swap(f) for f in r.findings]}) for r in results]
