"""The compute tier's agent run: load a category's ops from the marts, turn each into a record with
its efficiency, bound and library, estimate what tuning it could recover (the TraceLens impact
ladder), group the estimates into P-items and build the agent's findings and metrics.

The category agents (`analyzers/gemm.py`, `sdpa.py`, ...) only add what is specific to them: how
an op is classified, which facts go into `category_specific`, and the wording of the advice.
The steps live in modules of their own: `compute_ops` (loading from the marts), `compute_impact`
(the ladder and the P-items), `compute_findings` (a P-item as a Finding), `compute_advice`
(wording and patterns several agents share), `compute_records` and `compute_text`. Their public
names are importable from here too, as the agents use them.

Rules (reference/tracelens_analyzers.md §2.9-§2.10; the ladder is in `compute_impact`):
- efficiency above EFFICIENCY_ANOMALY_PERCENT is a measurement anomaly: no finding, a note.
- ops covered by a high-confidence fusion candidate (ctx.fusion_flagged_ops) get no finding.
- ops at or above their attainable share of the roofline are fine: no finding, one summary line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.compute_advice import (
    EAGER_ATTENTION_GEMMS,
    EAGER_ATTENTION_NOTE,
    SOFTMAX_PATTERN,
    attribution_hint,
    eager_attention_ops,
    find_eager_attention,
    generic_advice,
    latency_values,
    module_hint,
    takes_q_and_k,
    tensor_layout,
    unless_compiled,
)
from tracelake.analyzers.compute_findings import (
    QUALITY_CHECKS_FOR_COMPUTE,
    build_finding,
    comparative_members_table,
    efficiency_phrase,
    evidence_sql,
    finding_confidence,
    group_phrase,
    group_title,
    impact_explanation,
    lead_insight,
    members_table,
    relabel_sentence,
    trace2_time_ms,
)
from tracelake.analyzers.compute_impact import (
    efficiency_bucket,
    estimate_op_impact,
    group_ops,
    heuristic_group_name,
    heuristic_impact,
    pitem_floor,
    quantified_impact,
    sum_impacts,
)
from tracelake.analyzers.compute_ops import (
    RELABEL_SOURCE_CATEGORIES,
    claimed_kernels,
    dominant_kernel_category,
    load_agent_ops,
    load_op_rows,
    load_platform_peaks,
    relabel_target,
)
from tracelake.analyzers.compute_records import (
    COMMUNICATION_KEYWORDS,
    SYNTHETIC_SUFFIX,
    Advice,
    AgentData,
    Bound,
    ComputeAgent,
    ComputeMetrics,
    EffBucket,
    Impact,
    KernelShare,
    NearRoofline,
    OpGroup,
    OpRecord,
    RelabelledOp,
    TopOperation,
    kind_totals,
    near_roofline_summary,
    reaches_attainable,
)
from tracelake.analyzers.compute_text import (
    base_op_name,
    compact_shape,
    dtype_name,
    fmt,
    format_args,
    name_matches,
    parse_json_list,
    parse_json_object,
)
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

__all__ = [
    "COMMUNICATION_KEYWORDS", "EAGER_ATTENTION_GEMMS", "EAGER_ATTENTION_NOTE", "QUALITY_CHECKS_FOR_COMPUTE",
    "RELABEL_SOURCE_CATEGORIES", "SOFTMAX_PATTERN", "SYNTHETIC_SUFFIX", "Advice", "AgentData", "Bound",
    "ComputeAgent", "ComputeMetrics", "EffBucket", "Impact", "KernelShare", "NearRoofline", "OpGroup", "OpRecord",
    "RelabelledOp", "TopOperation", "attribution_hint", "base_metrics", "base_op_name", "build_finding",
    "claimed_kernels", "compact_shape", "comparative_members_table", "dominant_kernel_category",
    "dtype_name", "eager_attention_ops", "efficiency_bucket", "efficiency_phrase", "estimate_op_impact",
    "evidence_sql", "find_eager_attention", "finding_confidence", "fmt", "format_args", "generic_advice",
    "group_ops", "group_phrase", "group_title", "heuristic_group_name", "heuristic_impact", "impact_explanation",
    "kind_totals", "latency_values", "lead_insight", "load_agent_ops", "load_op_rows", "load_platform_peaks", "members_table",
    "module_hint", "name_matches", "near_roofline_summary", "no_data_result", "parse_json_list",
    "parse_json_object", "quantified_impact", "reaches_attainable", "relabel_sentence", "relabel_target",
    "run_agent", "sum_impacts", "summary_notes", "takes_q_and_k", "tensor_layout", "trace2_time_ms", "unless_compiled",
]

RELABEL_KERNEL_NOUNS = {"gemm": "GEMM", "sdpa": "attention", "moe": "MoE", "triton": "Triton"}  # how the notes call them
DATA_TABLE_ROWS = 10  # top operations listed per category (TraceLens' findings show the top ops)


def summary_notes(ops: Sequence[OpRecord], ctx: AnalysisContext) -> list[str]:
    """Notes on ops that get no tuning finding: anomalies, fusion-covered ops, exclusions."""
    notes = []
    for op in ops:
        if op.is_anomaly and ctx.roofline_assumed:
            notes.append(
                f"`{op.name}` ({op.shape or 'no shape'}) reports {op.efficiency_percent:.1f} % of the roofline of "
                f"{ctx.platform}, assumed: above {settings.EFFICIENCY_ANOMALY_PERCENT:.0f} %, the assumed platform is "
                "most likely not the GPU it ran on, so it gets no tuning finding; pass --platform with its GPU."
            )
        elif op.is_anomaly:
            notes.append(
                f"`{op.name}` ({op.shape or 'no shape'}) reports {op.efficiency_percent:.1f} % of roofline, above "
                f"{settings.EFFICIENCY_ANOMALY_PERCENT:.0f} %: a measurement anomaly (overlapping or mis-attributed "
                "kernels, or a perf model that over-counts), so it gets no tuning finding; verify the measurement."
            )
        elif op.name in ctx.fusion_flagged_ops:
            notes.append(
                f"`{op.name}` ({op.time_ms:.3f} ms) is covered by the fusion candidate "
                f"`{ctx.fusion_flagged_ops[op.name]}`; see Kernel Fusion Opportunities, no kernel-tuning finding here."
            )
        elif op.excluded:
            notes.append(f"`{op.name}` ({op.time_ms:.3f} ms): {op.excluded}")
    if ctx.comparison_scope == "comparative":
        unmatched = [op for op in ops if op.comparison is None]
        notes.append(
            "Comparative run: each op of trace 1 is matched with trace 2 by name, shapes and dtypes (else by model "
            "layer); efficiency = 100 x t2 / t1, below 100 % trace 1 is slower."
            + (f" {len(unmatched)} op signature(s) of trace 1 ({sum(op.time_ms for op in unmatched):.3f} ms) have no "
               "match in trace 2 and get no estimate." if unmatched else ""))
    return notes


def no_data_result(agent: ComputeAgent, metrics: ComputeMetrics) -> AgentResult:
    return AgentResult(
        agent=agent.name, tier="compute", category=agent.name, status="NO_DATA",
        metrics=metrics.model_dump(mode="json"),
    )


def base_metrics(db: duckdb.DuckDBPyConnection, agent: ComputeAgent, ctx: AnalysisContext,
                 peak_hbm: float | None) -> dict[str, Any]:
    return {
        "agent": agent.name,
        "display_name": agent.display_name,
        "trace_id": ctx.trace_id,
        "platform": ctx.platform,
        "comparison_scope": ctx.comparison_scope,
        "e2e_time_ms": ctx.e2e_time_ms,
        "op_categories": None if agent.owns_the_rest else list(load_agent_categories(db).owned_by(agent.name)),
        "peak_hbm_tb_per_s": peak_hbm,
    }


def run_agent(
    db: duckdb.DuckDBPyConnection,
    ctx: AnalysisContext,
    agent: ComputeAgent,
    metrics_model: type[ComputeMetrics],
    facts: Callable[[AgentData], BaseModel],
) -> AgentResult:
    """Load the agent's ops, estimate, group, and build its AgentResult."""
    peaks, peak_hbm = load_platform_peaks(db, ctx.platform)
    ops, handed_off = load_agent_ops(db, ctx, agent)
    data = AgentData(ctx=ctx, ops=ops, platform_peaks=peaks, peak_hbm_tb_per_s=peak_hbm, handed_off=handed_off)
    _estimate(db, ctx, agent, ops)
    kept, dropped = group_ops(ops, agent.family or (lambda op: op.kind), ctx.comparison_scope == "comparative",
                              pitem_floor(ctx))
    extra = agent.extra_groups(db, ctx, data) if agent.extra_groups is not None else []
    if not ops and not extra:
        metrics = metrics_model(**base_metrics(db, agent, ctx, peak_hbm), category_specific=facts(data))
        return no_data_result(agent, metrics)
    if extra:
        _add_extra_groups(ops, kept, dropped, extra)
    findings = [
        # a card of trace 2's gap claims none of trace 1's GPU time (its time is on trace 2's timeline)
        build_finding(rank, group, agent, data).model_copy(update={
            "claimed_kernels": claimed_kernels(db, ctx, [op.signature_key for op in group.members])
            if group.slower_trace == 1 else {}})
        for rank, group in enumerate(kept, start=1)
    ]
    metrics = metrics_model(
        **base_metrics(db, agent, ctx, peak_hbm),
        **_op_summary(ops, ctx),
        notes=_notes(ops, handed_off, dropped, ctx),
        groups_below_threshold=len(dropped),
        impact_below_threshold_percent=sum(g.impact.mid for g in dropped),
        # the ops at their attainable share, before the claims ledger; the report's "fine" line is made
        # after it (analyzers/coverage.py near_roofline_lines: ops a fusion finding owns are left out)
        near_roofline=near_roofline_summary(ops, agent.noun, ctx.e2e_time_ms),
        category_specific=facts(data),
    )
    return AgentResult(
        agent=agent.name, tier="compute", category=agent.name, status="OK",
        metrics=metrics.model_dump(mode="json"), findings=findings,
    )


def _estimate(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, agent: ComputeAgent, ops: list[OpRecord]) -> None:
    """Each op's kind, exclusion, attainable share of the roofline and impact estimate."""
    for op in ops:
        op.kind = agent.classify(op)
        op.fusable_at_floor = agent.fuses_latency_bound is not None and agent.fuses_latency_bound(op)
    exclusions = agent.exclude(db, ctx, ops) if agent.exclude is not None and ops else {}
    for op in ops:
        op.excluded = exclusions.get(op.signature_key)
        if agent.attainable is not None:
            op.attainable_percent = agent.attainable(op)
        if op.best_observed_percent is not None and ctx.comparison_scope == "standalone":
            # evidence beats the constant: the same op on this platform reached this in another trace
            op.attainable_percent = op.best_observed_percent
        op.impact = estimate_op_impact(op, ctx)


def _add_extra_groups(ops: list[OpRecord], kept: list[OpGroup], dropped: list[OpGroup], extra: list[OpGroup]) -> None:
    """The groups an agent builds itself (eager attention): their ops join the agent's, their
    groups the kept or dropped ones."""
    known = {op.signature_key for op in ops}
    ops.extend(op for g in extra for op in g.members if op.signature_key not in known)
    ops.sort(key=lambda op: (-op.time_ms, op.signature_key))
    kept += [g for g in extra if g.impact.mid >= settings.MIN_PITEM_IMPACT_SCORE]
    dropped += [g for g in extra if g.impact.mid < settings.MIN_PITEM_IMPACT_SCORE]
    kept.sort(key=lambda g: (-g.impact.mid, -g.time_ms))


def _op_summary(ops: Sequence[OpRecord], ctx: AnalysisContext) -> dict[str, Any]:
    """The metrics that sum up the agent's ops: time per category, counts, re-labelled and top ops."""
    categories: dict[str, float] = defaultdict(float)
    for op in ops:
        label = f"{op.relabelled_from} (re-labelled)" if op.relabelled_from else op.op_category
        categories[label] += op.time_ms
    total_ms = sum(op.time_ms for op in ops)
    return {
        "categories_present": dict(categories),
        "total_time_ms": total_ms,
        "percent_of_e2e": total_ms / ctx.e2e_time_ms * 100.0 if ctx.e2e_time_ms > 0 else 0.0,
        "op_count": len(ops),
        "call_count": sum(op.count for op in ops),
        "modeled_op_count": sum(1 for op in ops if op.has_perf_model),
        "relabelled_ops": [
            RelabelledOp(
                name=op.name, from_category=op.relabelled_from or "",
                kernel_category=max(op.kernel_category_shares, key=op.kernel_category_shares.__getitem__),
                kernel_share_percent=100.0 * max(op.kernel_category_shares.values()), time_ms=op.time_ms,
            )
            for op in ops if op.relabelled_from and op.kernel_category_shares
        ],
        "top_operations": [
            TopOperation(
                name=op.name, shape=op.shape, args=op.args, count=op.count, time_ms=op.time_ms,
                # the "% Roofline" column: trace 1's, also in comparative scope (where efficiency is 100 t2 / t1)
                percent_of_e2e=op.percent_of_e2e, efficiency_percent=op.roofline_percent, bound=op.bound,
                library=op.library, relabelled_from=op.relabelled_from,
            )
            for op in ops[:DATA_TABLE_ROWS]
        ],
        "operations": ops,
    }


def _notes(ops: Sequence[OpRecord], handed_off: Sequence[OpRecord], dropped: Sequence[OpGroup],
           ctx: AnalysisContext) -> list[str]:
    """summary_notes, then the ops handed to another agent and the groups below the threshold."""
    notes = summary_notes(ops, ctx)
    for target in sorted({op.analyzed_as for op in handed_off}):
        moved = [op for op in handed_off if op.analyzed_as == target]
        notes.append(
            f"{len(moved)} op(s) labelled `other` ({sum(op.time_ms for op in moved):.3f} ms) run mostly "
            f"{RELABEL_KERNEL_NOUNS.get(target, target)} kernels and were re-labelled: the {target} agent analyzes them."
        )
    if dropped:
        notes.append(
            f"{len(dropped)} further group(s) stay below the {settings.MIN_PITEM_IMPACT_SCORE} % of E2E reporting "
            f"threshold (together {sum(g.impact.mid for g in dropped):.3f} % of E2E at the mid estimate)."
        )
    return notes
