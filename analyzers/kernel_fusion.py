"""Kernel-fusion analyzer (system tier, experimental): groups of kernels that one fused kernel
could replace, with a projected fused time and the share of E2E it would save.

The analysis runs in four steps, one module each:

1. units (`fusion_units`): each computation kernel with the op a fused kernel would take it over
   from, read from the `fusion_kernel_units` and `cpu_op_perf_models` marts;
2. instances (`fusion_instances`): eager attention windows, nn.Module calls and op subtrees
   whose kernels one fused kernel could replace, each kernel in at most one instance;
3. estimates and candidates (`fusion_estimates`, `fusion_candidates`): instances with the same
   signature (label + kernel-type sequence) form one candidate, with its projected saving;
4. findings (`fusion_findings`): the candidates worth acting on, ranked by their mid impact.
"""

from __future__ import annotations

from collections import defaultdict

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Finding
from tracelake.analyzers.fusion_candidates import (
    AttentionModel,
    CandidateGroup,
    FusionCandidate,
    Signature,
    build_candidate,
    signature,
)
from tracelake.analyzers.fusion_estimates import Platform
from tracelake.analyzers.fusion_findings import AGENT_NAME, finding
from tracelake.analyzers.fusion_instances import eager_attention, module_instances, op_subtree_instances
from tracelake.analyzers.fusion_units import (
    MATRIX_KERNEL_TYPES,
    Instance,
    OpTable,
    Unit,
    kernel_count,
    load_modules,
    load_units,
)

__all__ = ["AGENT_NAME", "TIER", "AttentionModel", "FusionCandidate", "KernelFusionMetrics", "analyze"]

TIER = "system"
DISPLAY_NAME = "Kernel fusion"


class KernelFusionMetrics(BaseModel):
    platform: str
    peak_hbm_bw_gbps: float | None
    total_time_ms: float
    kernels_considered: int
    instance_count: int
    candidate_count: int  # candidates above the E2E threshold
    estimated_count: int
    min_percent_of_e2e: float
    max_kernels: int
    total_impact_mid: float
    candidates: list[FusionCandidate]
    high_confidence_ops: dict[str, str]


def _instances(db: duckdb.DuckDBPyConnection, trace_id: str, units: list[Unit], ops: OpTable) -> list[Instance]:
    """Every instance of 2..FUSION_MAX_KERNELS kernels, each unit in at most one."""
    covered: set[str] = set()
    instances = eager_attention(units, ops, covered)
    instances += module_instances(units, load_modules(db, trace_id), covered)
    instances += op_subtree_instances(db, trace_id, units, ops, covered)
    return [i for i in instances if 2 <= kernel_count(i.units) <= settings.FUSION_MAX_KERNELS]


def _ranked_candidates(instances: list[Instance], platform: Platform, ctx: AnalysisContext) -> list[CandidateGroup]:
    """One candidate per signature above the E2E threshold, ranked by mid impact, then time, then
    name; candidate ids are the ranks."""
    groups: dict[Signature, list[Instance]] = defaultdict(list)
    for instance in instances:
        groups[signature(instance)].append(instance)
    built: list[CandidateGroup] = []
    for key, members in groups.items():
        current_us = sum(u.time_us for i in members for u in i.units)
        if 100.0 * current_us / 1000.0 / ctx.e2e_time_ms < settings.FUSION_MIN_PERCENT_OF_E2E:
            continue
        built.append(build_candidate(key, members, current_us, platform, ctx, f"{len(built) + 1:02d}"))
    built.sort(key=lambda g: (-g.candidate.impact_mid, -g.candidate.current_time_ms, g.candidate.name))
    for rank, group in enumerate(built, start=1):
        group.candidate = group.candidate.model_copy(update={"candidate_id": f"{rank:02d}"})
    return built


def _without_what_fused_attention_removes(groups: list[CandidateGroup]) -> list[CandidateGroup]:
    """A candidate in the module of an eager-attention candidate whose non-GEMM kernels are only
    the layout copies a fused attention kernel makes unnecessary is rejected: that finding removes them."""
    attention = {tuple(g.candidate.module_chain): g.candidate.name for g in groups
                 if g.candidate.pattern == "eager_attention" and g.candidate.status == "estimated"}
    for group in groups:
        c = group.candidate
        owner = attention.get(tuple(c.module_chain))
        chain_types = {t for t in c.kernel_types if t not in MATRIX_KERNEL_TYPES}
        if (owner is None or c.pattern == "eager_attention" or c.status != "estimated" or not chain_types
                or not chain_types <= set(settings.FUSED_ATTENTION_REMOVES_KERNEL_TYPES)):
            continue
        group.candidate = c.model_copy(update={
            "status": "rejected",
            "reject_reason": (f"only layout copies ({', '.join(sorted(chain_types))}) beside the eager attention of "
                              f"{c.scope}: the fused attention kernel of '{owner}' reads its inputs strided, so that "
                              "finding removes them")})
    return groups


def _high_confidence_ops(groups: list[CandidateGroup], units: list[Unit]) -> dict[str, str]:
    """Ops whose kernel time high-confidence estimated candidates mostly remove, each with the
    candidate that removes the most of it: the compute agents leave them to this agent. Unfused
    attention is handed over at any confidence: its one method is the fused kernel's FLOP model,
    and a trace-quality warning (roctracer's same-stream overlaps) must not switch the method."""
    op_time: dict[str, float] = defaultdict(float)
    for u in units:
        op_time[u.name] += u.time_us
    covered_time: dict[str, float] = defaultdict(float)
    owner: dict[str, tuple[float, str]] = {}
    for group in groups:
        c = group.candidate
        if c.status != "estimated" or (c.confidence != "high" and c.pattern not in settings.FUSION_ANY_CONFIDENCE_PATTERNS):
            continue
        for name, t in group.removed_time_us.items():
            covered_time[name] += t
            if t > owner.get(name, (0.0, ""))[0]:
                owner[name] = (t, c.name)
    return {name: owner[name][1] for name, t in covered_time.items()
            if op_time[name] > 0 and t / op_time[name] >= settings.FUSION_FLAG_OP_TIME_SHARE_MIN}


def _findings(groups: list[CandidateGroup], ctx: AnalysisContext) -> list[Finding]:
    reported = [g for g in groups
                if g.candidate.status == "estimated" and g.candidate.impact_mid >= settings.MIN_PITEM_IMPACT_SCORE]
    findings: list[Finding] = []
    for group in reported[:settings.MAX_FUSION_FINDINGS]:
        found = finding(group.candidate, group.members, ctx)
        if any(f.finding_id == found.finding_id for f in findings):
            found = found.model_copy(update={"finding_id": f"{found.finding_id}-{group.candidate.candidate_id}"})
        findings.append(found)
    return findings


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Fusion candidates of one trace, their projected fused time and the findings worth acting on."""
    if ctx.e2e_time_ms <= 0:
        return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="NO_DATA",
                           error="the trace has no linked GPU time")
    units, ops = load_units(db, ctx.trace_id)
    platform = Platform.load(db, ctx.platform)
    instances = _instances(db, ctx.trace_id, units, ops)
    groups = _without_what_fused_attention_removes(_ranked_candidates(instances, platform, ctx))
    candidates = [g.candidate for g in groups]
    findings = _findings(groups, ctx)
    metrics = KernelFusionMetrics(
        platform=ctx.platform, peak_hbm_bw_gbps=platform.bw_gbps, total_time_ms=round(ctx.e2e_time_ms, 4),
        kernels_considered=kernel_count(units), instance_count=len(instances),
        candidate_count=len(candidates), estimated_count=sum(c.status == "estimated" for c in candidates),
        min_percent_of_e2e=settings.FUSION_MIN_PERCENT_OF_E2E, max_kernels=settings.FUSION_MAX_KERNELS,
        total_impact_mid=round(sum(f.impact_score or 0.0 for f in findings), 3),
        candidates=candidates, high_confidence_ops=_high_confidence_ops(groups, units))
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="OK" if units else "NO_DATA",
                       error=None if units else "no computation kernels linked to host ops",
                       metrics=metrics.model_dump(mode="json"), findings=findings)
