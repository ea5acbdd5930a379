"""The analysis steps of the findings: the agents (system tier, then compute tier), each GPU event
claimed by one finding, the ranking and its validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.agents.agent_metrics import compute_time_ms, fusion_metrics, multi_kernel_result
from tracelake.agents.claims import assign_claims, with_ledger_sql
from tracelake.agents.llm import LlmCommand
from tracelake.agents.registry import COMPUTE_AGENTS, SYSTEM_AGENTS, by_name
from tracelake.agents.runner import RunnerSettings, render, run_tier
from tracelake.agents.sequencing import replay_summary, sequence_findings
from tracelake.agents.trace_scope import limit_findings
from tracelake.analysis_facts import AnalysisFacts
from tracelake.analysis_runner import AnalysisRunner
from tracelake.analyze_options import AnalyzeOptions
from tracelake.analyzers import replay, settings, trace_overview
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, PriorityData
from tracelake.analyzers.coverage import near_roofline_lines, unaddressed_ops
from tracelake.analyzers.finding_windows import with_finding_windows
from tracelake.reports.priority import build_priority_data
from tracelake.reports.validation import validate
from tracelake.run_contracts import AgentTiming
from tracelake.trace_steps import CategoryData


@dataclass(frozen=True)
class AgentRun:
    """What the agents found, before the findings are claimed and rendered."""

    ctx: AnalysisContext  # with the ops kernel fusion flagged, so the compute agents skip them
    results: list[AgentResult]
    category_time: dict[str, float]  # kernel time (ms) each compute agent analyzed


class _JsonList(BaseModel):
    """A list or mapping payload written as JSON through pydantic."""

    items: Any


def _agent_settings(options: AnalyzeOptions) -> RunnerSettings:
    llm = options.llm_cmd if options.agents == "llm" else None
    return RunnerSettings(timeout_seconds=settings.AGENT_TIMEOUT_SECONDS, attempts=settings.AGENT_ATTEMPTS,
                          llm=LlmCommand(llm, settings.AGENT_TIMEOUT_SECONDS) if llm else None)


def run_system_agents(db: duckdb.DuckDBPyConnection, facts: AnalysisFacts, options: AnalyzeOptions,
                      runner: AnalysisRunner) -> list[AgentResult]:
    """Idle time, transfers and collectives, kernel fusion: each on its own cursor, at once."""
    definitions = list(SYSTEM_AGENTS) if facts.trace.gate.run_system_tier else []
    return run_tier(definitions, db.cursor, facts.context(), _agent_settings(options),
                    runner.warnings)


def run_compute_agents(db: duckdb.DuckDBPyConnection, facts: AnalysisFacts, options: AnalyzeOptions,
                       system_results: list[AgentResult], categories: CategoryData,
                       runner: AnalysisRunner) -> AgentRun:
    """The compute agents, after the system tier: ops that kernel fusion flagged get no kernel-tuning
    finding. Every compute agent runs (NO_DATA when it has nothing): ops re-labelled from `other` by
    their kernels reach the gemm / sdpa agents even without such an op category."""
    ctx = facts.context()
    fusion = fusion_metrics(system_results)
    if fusion is not None:
        ctx = ctx.model_copy(update={"fusion_flagged_ops": fusion.high_confidence_ops})
        runner.write("category_data/fusion_candidates.json", _JsonList(items=fusion.candidates))
    multi_kernel = multi_kernel_result(system_results)
    if multi_kernel is not None:
        runner.write("category_data/multi_kernel_data.json", _JsonList(items=multi_kernel.metrics))
    compute = list(COMPUTE_AGENTS) if facts.trace.gate.run_compute_tier else []
    compute_results = run_tier(compute, db.cursor, ctx, _agent_settings(options), runner.warnings)
    return AgentRun(ctx, system_results + compute_results, compute_time_ms(compute_results) or categories.category_time)


def claim_findings(db: duckdb.DuckDBPyConnection, agents: AgentRun, options: AnalyzeOptions,
                   runner: AnalysisRunner) -> list[AgentResult]:
    """Each GPU event and idle gap counted in one finding, each finding placed on the timeline and in
    its serving phase, then rendered (findings markdown, metrics JSON)."""
    ctx = agents.ctx
    results = with_ledger_sql(assign_claims(agents.results, ctx.e2e_time_ms), ctx.trace_id, ctx.trace2_id)
    # each finding says the serving phase it applies to (the steps that launched its GPU events)
    results = trace_overview.with_finding_phases(db, ctx.trace_id, ctx.phases, results)
    # each finding's window on the timeline, its steps and the host work inside its gaps
    results = with_finding_windows(db, ctx.trace_id, results)
    # a trace that is not the workload (harness, capture): low confidence, no wins claimed
    results = limit_findings(results, ctx.quality_verdicts)
    # each finding's saving as the replayed timeline has it, and the finding it waits for
    if ctx.trace2_id is None:  # a comparison's findings are differences between traces, not changes to one
        results = sequence_findings(replay.load_graph(db, ctx.trace_id), results, ctx.e2e_time_ms)
    agent_settings = _agent_settings(options)
    results = [r if r.status == "ERROR" else render(by_name(r.agent), r, ctx, agent_settings, runner.warnings)
               for r in results]
    for result in results:
        runner.write(f"category_data/{result.agent}_metrics.json", result)
        folder = "system_findings" if result.tier == "system" else "category_findings"
        markdown = result.findings_markdown or (
            f"# {result.agent}\n\n**Status**: {result.status}\n\n{result.error or 'No findings.'}\n")
        runner.write(f"{folder}/{result.agent}_findings.md", markdown)
    runner.metadata.agents = [AgentTiming(agent=r.agent, tier=r.tier, status=r.status, attempts=r.attempts,
                                          started_at=r.started_at, finished_at=r.finished_at) for r in results]
    return results


def rank_findings(db: duckdb.DuckDBPyConnection, agents: AgentRun, findings: list[AgentResult],
                  facts: AnalysisFacts, runner: AnalysisRunner) -> PriorityData:
    """priority_data.json: the findings by impact; the plot of it starts drawing."""
    priority = build_priority_data(findings, agents.category_time, agents.ctx,
                                   unaddressed_ops(db, agents.ctx, findings),
                                   near_roofline_lines(db, agents.ctx, findings),
                                   None if agents.ctx.trace2_id else
                                   replay_summary(replay.load_graph(db, agents.ctx.trace_id), findings,
                                                  replay.longest_critical_path(db, agents.ctx.trace_id)))
    runner.write("priority_data.json", priority)
    runner.draw_plot(priority, facts.trace.gpu.model_dump())
    return priority


def validate_findings(db: duckdb.DuckDBPyConnection, agents: AgentRun, findings: list[AgentResult],
                      priority: PriorityData, runner: AnalysisRunner) -> None:
    """metadata/validation.json: whether the findings add up; its problems are warnings."""
    ctx = agents.ctx
    anomalous = trace_overview.roofline_anomalies(db, ctx.trace_id, ctx.platform)
    validation = validate(findings, priority, agents.category_time, anomalous, ctx)
    runner.write("metadata/validation.json", validation)
    runner.warnings.extend(validation.problems)
