"""Findings in the order they pay off: each finding's recoverable time is what the what-if replay
(analyzers/replay.py) says the trace saves when its change is made, not what its own GPU events and
gaps add up to.

A finding's change is its owned claims scaled to its estimate: each claimed GPU event loses its
share of the estimate, each claimed idle gap closes by its share; a fusing finding's events also
lose that share of their launch calls and the host work before them (settings.REPLAY_FUSING_AGENTS:
fusing kernels removes their launches). A finding whose replayed saving alone is well below its
kernel-level estimate (settings.REPLAY_GATED_SHARE) is replayed after each larger finding in turn;
when one releases it (settings.REPLAY_RELEASED_SHARE), the finding is "realisable after" that one and
its saving is what it adds once that one is made. A finding that runs the step as a GPU graph
(settings.REPLAY_LAUNCH_FREE_FINDINGS) takes every launch in its window off the host. No saving is
credited above the finding's own kernel-level estimate. The summary is the replay of all findings
together: savings that overlap on the timeline are not summed twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from tracelake.analyzers import replay, settings
from tracelake.analyzers.contracts import AgentResult, Finding, ReplaySummary

US_PER_MS = 1000.0
_REPLAY_EPSILON_MS = 0.001  # a printed unit: below it the replay and the estimate agree


@dataclass(frozen=True)
class _Candidate:
    finding: Finding
    change: replay.Change
    kernel_level_ms: float
    solo_ms: float


def _change(finding: Finding, graph: replay.TimelineGraph) -> replay.Change:
    claimed_us = sum(finding.claimed_kernels.values()) + sum(finding.claimed_gaps.values())
    estimate_ms = finding.kernel_level_ms if finding.kernel_level_ms is not None else (finding.recoverable_ms or 0.0)
    share = min(1.0, estimate_ms * US_PER_MS / claimed_us) if claimed_us > 0 else 0.0
    removals = dict.fromkeys(finding.claimed_kernels, share) if finding.agent in settings.REPLAY_FUSING_AGENTS else {}
    if finding.finding_id in settings.REPLAY_LAUNCH_FREE_FINDINGS and finding.ts_start_us is not None:
        window = graph.gpu.filter((pl.col("ts_us") >= finding.ts_start_us) & (pl.col("ts_us") <= finding.ts_end_us))
        removals = dict.fromkeys(window["event_idx"].to_list(), 1.0)
    return replay.Change({k: us * share for k, us in finding.claimed_kernels.items()},
                         {g: us * share for g, us in finding.claimed_gaps.items()}, removals)


def _saving(graph: replay.TimelineGraph, base_us: float, change: replay.Change) -> float:
    return max(0.0, (base_us - replay.replay(graph, change).span_us) / US_PER_MS)


def _release(graph: replay.TimelineGraph, base_us: float, gated: _Candidate,
             earlier: list[_Candidate]) -> tuple[Finding | None, float]:
    """The earlier finding after which the gated one saves the most, and that saving (ms)."""
    best: tuple[Finding | None, float] = (None, gated.solo_ms)
    enablers = [c for c in earlier if c.solo_ms >= settings.REPLAY_GATED_SHARE * c.kernel_level_ms]
    for enabler in enablers[: settings.REPLAY_MAX_ENABLER_TRIES]:
        together = _saving(graph, base_us, enabler.change.plus(gated.change))
        released = min(gated.kernel_level_ms, together - enabler.solo_ms)
        if released > best[1]:
            best = (enabler.finding, released)
    if best[0] is None or best[1] - gated.solo_ms < settings.REPLAY_RELEASED_SHARE * gated.kernel_level_ms:
        return None, gated.solo_ms
    return best


def _replayed(finding: Finding, replayed_ms: float, after: Finding | None, e2e_ms: float) -> Finding:
    kernel_ms = finding.recoverable_ms or 0.0
    # nothing recovers more than its own estimate: a faster timeline elsewhere is another finding's
    saving_ms = min(replayed_ms, kernel_ms)
    factor = saving_ms / kernel_ms if kernel_ms > 0 else 0.0

    def scaled(value: float | None) -> float | None:
        return None if value is None else value * factor

    update: dict[str, object] = {
        "kernel_level_ms": kernel_ms, "recoverable_ms": saving_ms, "impact_low": scaled(finding.impact_low),
        "impact_score": 100.0 * saving_ms / e2e_ms if e2e_ms > 0 else 0.0, "impact_high": scaled(finding.impact_high),
        "realisable_after": after.finding_id if after is not None else None,
        "replayed_full_ms": replayed_ms if replayed_ms > kernel_ms + _REPLAY_EPSILON_MS else None,
    }
    return finding.model_copy(update=update)


def _replayable(results: list[AgentResult]) -> list[Finding]:
    return [f for r in results if r.status == "OK" for f in r.findings
            if f.recoverable_ms is not None and (f.claimed_kernels or f.claimed_gaps)]


def sequence_findings(graph: replay.TimelineGraph, results: list[AgentResult], e2e_ms: float) -> list[AgentResult]:
    """The results with each estimated, claiming finding's recoverable time replaced by its replayed
    saving and, when it is gated, the finding after which it is realisable (module docstring)."""
    if graph.gpu.is_empty():
        return results
    base_us = replay.replay(graph).span_us
    candidates = sorted((_Candidate(f, _change(f, graph), f.recoverable_ms or 0.0, _saving(graph, base_us, _change(f, graph)))
                         for f in _replayable(results)),
                        key=lambda c: (-c.solo_ms, c.finding.finding_id))
    updated: dict[str, Finding] = {}
    for candidate in candidates:
        after, saving = None, candidate.solo_ms
        if candidate.solo_ms < settings.REPLAY_GATED_SHARE * candidate.kernel_level_ms:
            after, saving = _release(graph, base_us, candidate, [c for c in candidates if c is not candidate])
        updated[candidate.finding.finding_id] = _replayed(candidate.finding, saving, after, e2e_ms)
    return [r.model_copy(update={"findings": [updated.get(f.finding_id, f) for f in r.findings]})
            for r in results]


def replay_summary(graph: replay.TimelineGraph, results: list[AgentResult],
                   path: replay.CriticalPath | None = None) -> ReplaySummary | None:
    """The replay of every sequenced finding's change together, beside their kernel-level and
    replayed sums, the replay's error on the unchanged timeline and the longest step's critical path."""
    if graph.gpu.is_empty():
        return None
    findings = [f for f in _replayable(results) if f.kernel_level_ms is not None]
    combined = replay.NO_CHANGE
    for finding in findings:
        combined = combined.plus(_change(finding, graph))
    base_us = replay.replay(graph).span_us
    together = replay.replay(graph, combined)
    span_error, worst = replay.reproduction_error(graph)
    return ReplaySummary(
        measured_span_ms=graph.measured_span_us / US_PER_MS, unchanged_error_us=span_error,
        unchanged_worst_start_error_us=worst, kernel_level_sum_ms=sum(f.kernel_level_ms or 0.0 for f in findings),
        replayed_sum_ms=sum(f.recoverable_ms or 0.0 for f in findings),
        # capped as each finding is: no more than the findings' own estimates
        combined_ms=min(max(0.0, (base_us - together.span_us) / US_PER_MS), sum(f.recoverable_ms or 0.0 for f in findings)),
        iterations=together.iterations,
        converged=together.converged,
        critical_path_step=path.step_number if path else None,
        critical_path_ms=path.span_us / US_PER_MS if path else None,
        critical_path_gpu_ms=path.gpu_us / US_PER_MS if path else None,
        critical_path_host_ms=path.host_us / US_PER_MS if path else None)
