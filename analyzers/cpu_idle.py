"""CPU / idle analyzer (system tier): why the GPU sits idle, and how much of that is recoverable.

TraceLens only reports the idle share (flagged above 15 %) and never quantifies it. Here every gap
between consecutive GPU busy intervals is a row of the `gpu_idle_gaps` mart, whose `gap_class`
(one rule for CUDA and HIP, set in SQL from dbt vars) says what the GPU waited for:

- `launch_bound`: the kernel closing the gap was launched late (it started within a launch latency of
  its launch) and the gap is short: the host could not launch as fast as the GPU ran;
- `host_work`: launched late, and the gap is long: the host was busy elsewhere (its python frames
  and cpu ops at both ends of the gap are named);
- `sync_blocked`: the launching thread sat in a synchronizing call spanning the whole gap and that call
  issued the GPU op closing it (a blocking copy);
- `queued_waiting`: the closing kernel had been queued well ahead and the GPU still waited (graph
  replay, another stream, a collective, an event): not a host problem;
- `window_edge`: a long first or last gap of the profile window: reported, never claimed.

The recoverable time of the host classes is the time their gaps exceed settings.RESIDUAL_GAP_US,
scaled by a low / mid / high recovery fraction (estimate_method "heuristic"). A finding claims those
gaps (`claimed_gaps`: gap_id -> the µs above the residual), and its impact is computed from their
sum. Host-work gaps are credited only where the host's frames were recorded and the GPU share is
not tiny (trace_quality's gpu_busy_share check warns); queued-waiting and window-edge gaps are never credited.


The measurements are read in cpu_idle_metrics (from gpu_idle_gaps and the idle-gap marts built on
it), the findings written in cpu_idle_findings; this module runs the agent.
"""

from __future__ import annotations

import duckdb

from tracelake.analyzers.common import NO_GPU_TIMELINE, no_data_result
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
from tracelake.analyzers.cpu_idle_findings import AGENT_NAME, REASON_TEXT, idle_findings
from tracelake.analyzers.cpu_idle_metrics import (
    CLAIMED_GAPS_SQL,
    CLAIMING_CLASSES,
    GAP_CLASSES,
    GAP_CLASSES_SQL,
    KERNEL_STATS_SQL,
    TIMELINE_SQL,
    BlockingCall,
    CpuIdleMetrics,
    GapClassStats,
    GapReasonStats,
    HostFrame,
    claimed_gaps,
    read_metrics,
)

__all__ = ["AGENT_NAME", "CLAIMED_GAPS_SQL", "CLAIMING_CLASSES", "GAP_CLASSES", "GAP_CLASSES_SQL", "KERNEL_STATS_SQL",
           "REASON_TEXT", "TIER", "TIMELINE_SQL", "BlockingCall", "CpuIdleMetrics", "GapClassStats", "GapReasonStats",
           "HostFrame", "analyze"]

TIER = "system"
DISPLAY_NAME = "CPU / idle time"


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Idle time of one trace: how much, in which kind of gaps, and what would recover it."""
    metrics = read_metrics(db, ctx)
    if metrics is None:
        return no_data_result(AGENT_NAME, "system", NO_GPU_TIMELINE)
    claims = claimed_gaps(db, ctx.trace_id)
    findings = idle_findings(metrics, ctx, claims) if metrics.idle_flagged else []
    metrics.patterns_detected = [f.finding_id.split(":", 1)[1] for f in findings]
    scored = [f for f in findings if f.impact_score is not None]
    if scored:
        metrics.dominant_pattern = max(scored, key=lambda f: f.impact_score or 0.0).finding_id.split(":", 1)[1]
    elif findings:
        metrics.dominant_pattern = metrics.patterns_detected[0]
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="OK",
                       metrics=metrics.model_dump(mode="json"), findings=findings)
