"""What a trace that is not the workload can tell: the quality gate's scope limits applied to the
findings, whatever agent made them.

A trace flagged by one of ``settings.NOT_THE_WORKLOAD_CHECKS`` (trace_quality's gpu_busy_share: a
micro-benchmark or harness; graph_capture: a GPU-graph capture) still gets its findings, but each
is low confidence, and the ones of the tiers that check rules out keep their claims and evidence
with no recoverable-time estimate: they rank after every estimated finding and are not presented
as wins. The report opens with ``opening_sentences`` (reports/analysis_md.py prints them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, Finding

_EFFECT = {  # what the report says each limit does to the findings
    "gpu_busy_share": ("findings are limited to the kernels it ran: their efficiency is stated at low confidence "
                       "and with no time claim, as the harness's window is not a workload's E2E; its idle time, "
                       "launches and copies are the harness's, so the system-level findings carry no "
                       "recoverable-time estimate either"),
    "graph_capture": ("no finding below is a recoverable win for the workload: they describe capture-time work, at "
                      "low confidence and with no time estimate"),
}


_REASON = {  # what the trace is, in the sentence a limited finding's insight ends with
    "gpu_busy_share": "a micro-benchmark or harness (GPU busy a tiny share of its span)",
    "graph_capture": "a GPU-graph capture, not the workload",
}


def limiting_checks(verdicts: Mapping[str, str]) -> list[str]:
    """The not-the-workload checks that warn on this trace (check names, in settings order); a
    capture alone when it warns (its GPU share is tiny because nothing is replayed: one reason)."""
    limits = [name for name in settings.NOT_THE_WORKLOAD_CHECKS if verdicts.get(name) in ("warn", "fail")]
    return ["graph_capture"] if "graph_capture" in limits else limits


def opening_sentences(checks: Iterable[Mapping[str, object]]) -> list[str]:
    """One sentence per limiting check, from its trace_quality detail: what the trace is and what
    that leaves the findings."""
    by_name = {str(c.get("check_name")): c for c in checks}
    sentences = []
    for name in limiting_checks({n: str(c.get("verdict")) for n, c in by_name.items()}):
        detail = str(by_name[name].get("detail") or "").strip().rstrip(".")
        lead = f"This trace is {detail}" if name == "graph_capture" else detail[:1].upper() + detail[1:]
        sentences.append(f"{lead}; {_EFFECT[name]}.")
    return sentences


def _limited(finding: Finding, unestimated: bool, reason: str) -> Finding:
    update: dict[str, object] = {"confidence": "low"}
    if unestimated and finding.impact_score is not None:
        update.update(impact_low=None, impact_score=None, impact_high=None, recoverable_ms=None,
                      estimate_method="qualitative",
                      insight=finding.insight + f" Not a recoverable win here: this trace is {reason} "
                                                "(trace quality), so no time estimate is given.")
    return finding.model_copy(update=update)


def limit_findings(results: list[AgentResult], verdicts: Mapping[str, str]) -> list[AgentResult]:
    """The results with every finding limited to what a flagged trace can tell (unchanged when no
    not-the-workload check warns)."""
    limits = limiting_checks(verdicts)
    if not limits:
        return results
    tiers = {tier for name in limits for tier in settings.NOT_THE_WORKLOAD_CHECKS[name]}
    reason = " and ".join(_REASON[name] for name in limits)
    return [r.model_copy(update={"findings": [_limited(f, f.tier in tiers, reason) for f in r.findings]})
            for r in results]
