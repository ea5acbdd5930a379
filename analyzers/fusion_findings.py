"""The kernel-fusion finding of one candidate: its sentences, its evidence and the kernels it claims."""

from __future__ import annotations

import re

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import AnalysisContext, Finding
from tracelake.analyzers.fusion_candidates import AttentionModel, FusionCandidate
from tracelake.analyzers.fusion_units import Instance
from tracelake.core.sql_text import sql_literal

AGENT_NAME = "kernel_fusion"

# Evidence: the candidate's chain instances (instance number, kernel event ids inlined) joined to
# `kernels`: the instance count, the kernels per instance and the chain time the finding prints.
EVIDENCE_SQL = """
with claimed(instance, event_idx) as (select unnest({instances}), unnest({event_ids})),
e2e as (select analysis_window_ms as e2e_time_ms from workload_facts where trace_id = {trace})
select count(distinct claimed.instance) as instance_count,
    count(*) / count(distinct claimed.instance) as kernels_per_instance,
    sum(kernels.dur_us) / 1000 as chain_time_ms,
    100.0 * sum(kernels.dur_us) / 1000 / any_value(e2e.e2e_time_ms) as percent_of_e2e
from claimed
join kernels on kernels.trace_id = {trace} and kernels.event_idx = claimed.event_idx
cross join e2e"""

PATTERN_ACTIONS = {
    "eager_attention": ("Replace the explicit matmul-softmax-matmul with the framework's fused scaled-dot-product "
                        "attention, so the score matrix is never written to memory."),
    "gemm_epilogue": ("Fuse the elementwise ops into the GEMM epilogue (a vendor GEMM library call with a "
                      "bias/activation epilogue) so the GEMM output is written once."),
    "rms_norm": "Use a single fused RMSNorm kernel instead of the separate power, mean, rsqrt and scale ops.",
    "layer_norm": "Use a single fused LayerNorm kernel instead of the separate statistics and scale ops.",
    "rope": "Apply the rotary embedding with one fused kernel instead of separate slice, negate, concatenate and multiply ops.",
    "gated_activation": "Compute the activation and the gating multiply in one fused kernel (or in the GEMM epilogue).",
    "elementwise_chain": ("Fuse the chain of elementwise ops into one kernel with graph-level compilation, so "
                          "intermediate tensors stay on chip."),
}
COMPILED_CHAIN_ACTION = ("The model is already compiled, yet these ops run as separate kernels: find the graph break that "
                         "keeps them out of the compiled region (torch._dynamo.explain) or fuse them by hand.")
ROOFLINE_METHOD = ("low = time x share of bytes no longer moved (fused kernel at today's bandwidth); high = time - "
                   "fused roofline time (bytes after removing intermediates / HBM bandwidth, overlapped with FLOPs at "
                   f"{settings.FUSION_OVERLAP_FACTOR}); mid = their mean")
PARTIAL_METHOD = "as the roofline method, over the ops with a perf model only; ops without bytes keep their measured time"
MEASURED_METHOD = (f"the removed ops' measured kernel time x {settings.TARGET_LOW}/{settings.TARGET_MID}/"
                   f"{settings.TARGET_HIGH} (low/mid/high)")
SLOWDOWN_REASON = ("each separate kernel writes its result to memory and the next one reads it back; for short "
                   "memory-bound kernels that round trip and the per-kernel launch dominate.")
KERNEL_NAME_CHARS = 60  # longer kernel names are clipped in the finding's table
OPS_LISTED = 8


def claimed_kernels(members: list[Instance]) -> dict[int, float]:
    """The GPU events of the candidate's chain instances: event_idx -> dur_us."""
    return {k[0]: k[3] for instance in members for u in instance.units for k in u.kernels}


def _evidence_sql(trace_id: str, members: list[Instance]) -> str:
    instances = [n for n, instance in enumerate(members, start=1) for u in instance.units for _ in u.kernels]
    event_ids = [k[0] for instance in members for u in instance.units for k in u.kernels]
    return EVIDENCE_SQL.format(trace=sql_literal(trace_id), instances=instances, event_ids=event_ids).strip()


def _fused_time_sentence(c: FusionCandidate) -> str:
    model = c.attention_model
    if model is None:
        return f"one fused kernel would take about {c.fused_time_ms:.3f} ms."
    return (f"one fused attention kernel would take about {model.fused_time_low_ms:.3f}-{model.fused_time_high_ms:.3f} ms: "
            f"{model.flops / 1e12:.2f} TFLOP of attention at {model.effective_percent(model.fused_time_high_ms):.0f}-"
            f"{model.effective_percent(model.fused_time_low_ms):.0f} % of the {model.peak_tflops:g} TFLOPS "
            f"{model.compute_spec} peak.")


def _attention_method(model: AttentionModel | None) -> str:
    if model is None:
        return ""
    return (f"fused attention time = FLOPs of the batched matmuls (QK^T and PV, 4 x B x H x Sq x Skv x D) / "
            f"({model.compute_spec} peak x attainable efficiency) = {model.flops / 1e12:.3f} TFLOP / "
            f"({model.peak_tflops:g} TFLOPS x {model.effective_percent(model.fused_time_high_ms):.1f}-"
            f"{model.effective_percent(model.fused_time_low_ms):.1f} %) = "
            f"{model.fused_time_low_ms:.3f}-{model.fused_time_high_ms:.3f} ms (each instance at the efficiency band "
            f"fused attention reaches at its shape; the largest, N = {model.seq_len} and head dim {model.head_dim}: "
            f"{model.efficiency_low_percent:.0f}-{model.efficiency_high_percent:.0f} %, the TraceLens sdpa band for the "
            f"nearest anchor N = {model.band_anchor} capped by FlashAttention-2 to FlashAttention-3 forward at that "
            f"head dim, FlashAttention-3 paper); saving = the window's measured time - the fused time (low at "
            f"the band's low efficiency, mid at its middle)")


def _method(c: FusionCandidate) -> str:
    if c.estimation == "flops":
        return _attention_method(c.attention_model)
    return {"measured": MEASURED_METHOD, "roofline": ROOFLINE_METHOD, "partial": PARTIAL_METHOD}[c.estimation]


def _kernel_table(c: FusionCandidate) -> str:
    def clipped(kernel: str) -> str:
        return (kernel[:KERNEL_NAME_CHARS] + "...") if len(kernel) > KERNEL_NAME_CHARS else kernel

    return "\n".join(
        ["| # | Op | Kernel | Type |", "|---|---|---|---|"]
        + [f"| {i} | `{op}` | `{clipped(k)}` | {t} |"
           for i, (op, k, t) in enumerate(zip(c.kernel_ops, c.kernel_names, c.kernel_types), start=1)])


def _identification(c: FusionCandidate) -> str:
    return (f"{c.instance_count} calls of `{c.scope}`"
            + (f" (module chain {' > '.join(c.module_chain[-3:])})" if c.module_chain else "")
            + f" each launch {c.kernel_count} kernels: {', '.join(f'`{o}`' for o in c.op_names[:OPS_LISTED])}"
            + ("..." if len(c.op_names) > OPS_LISTED else "")
            + f" (source: `kernel_fusion_metrics.json` -> `candidates`, candidate_id `{c.candidate_id}`).")


def _details(c: FusionCandidate, action: str) -> str:
    return (f"**Identification:** {_identification(c)}\n\n"
            f"**Data:**\n\n{_kernel_table(c)}\n\n"
            f"**Reasoning for Slowdown:** {SLOWDOWN_REASON} "
            f"Confidence {c.confidence}: {c.confidence_reason}.\n\n"
            f"**Resolution:** {action}\n\n"
            f"**Impact estimate:** {_method(c)}: saves {c.savings_low_ms:.3f}-{c.savings_high_ms:.3f} ms = "
            f"{c.impact_low:.2f}-{c.impact_high:.2f} % of E2E (mid {c.impact_mid:.2f} %).")


def finding(c: FusionCandidate, members: list[Instance], ctx: AnalysisContext) -> Finding:
    slug = re.sub(r"[^a-z0-9]+", "-", f"{c.pattern}-{c.scope}".lower()).strip("-")
    action = PATTERN_ACTIONS[c.pattern]
    if ctx.facts.is_compiled and c.pattern == "elementwise_chain":
        action = COMPILED_CHAIN_ACTION
    return Finding(
        finding_id=f"{AGENT_NAME}:{slug}", agent=AGENT_NAME, tier="system", category=AGENT_NAME,
        title=c.name,
        insight=(f"{c.instance_count} instances of {c.kernel_count} kernels in {c.scope} take {c.current_time_ms:.3f} ms "
                 f"({c.percent_of_e2e:.1f} % of E2E); " + _fused_time_sentence(c)),
        action=action,
        impact_low=c.impact_low, impact_score=c.impact_mid, impact_high=c.impact_high,
        recoverable_ms=round(c.impact_mid * ctx.e2e_time_ms / 100.0, 4),
        # every estimation is a model: partial projects only the modelled ops (the rest keep their time)
        estimate_method="quantified", confidence=c.confidence,
        evidence={"candidate_id": c.candidate_id, "instance_count": c.instance_count, "kernel_count": c.kernel_count,
                  "current_time_ms": c.current_time_ms, "fused_time_ms": c.fused_time_ms,
                  "savings_ms": [c.savings_low_ms, c.savings_mid_ms, c.savings_high_ms],
                  "covered_ops": c.covered_ops, "estimation": c.estimation, "modeled_share": c.modeled_share},
        evidence_sql=_evidence_sql(ctx.trace_id, members),
        claimed_kernels=claimed_kernels(members),
        operations=c.covered_ops,
        details=_details(c, action),
    )
