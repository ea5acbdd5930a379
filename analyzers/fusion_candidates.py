"""Fusion candidates: the instances with one signature (source, scope, kernel-type sequence) as one
candidate, with its projected saving, its share of E2E and how far the projection can be trusted."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.common import expected_attention_band
from tracelake.analyzers.confidence import lowered
from tracelake.analyzers.contracts import AnalysisContext, Confidence
from tracelake.analyzers.fusion_estimates import Estimate, Platform, attention_fallback, estimate
from tracelake.analyzers.fusion_units import MATRIX_KERNEL_TYPES, Instance

FUSION_MAX_EXAMPLE_OPS = 20  # op ids of the first instance kept in a candidate (for lookups)
# Kernel durations are what the estimate rests on: overlapping same-stream kernels mean they are off.
FUSION_QUALITY_CHECKS = ("same_stream_overlaps",)
NAME_HINTS = {
    "attention": ("attention", "attn", "sdpa"),
    "norm": ("rmsnorm", "rms_norm", "layernorm", "layer_norm", "batchnorm", "batch_norm", "groupnorm", "norm"),
    "activation": ("mlp", "silu", "swiglu", "gelu", "intermediate", "feedforward", "ffn", "act"),
    "rope": ("rotary", "rope"),
}
# The module-name hints (NAME_HINTS keys) that agree with each named pattern (None: no hint).
PATTERN_FAMILIES: dict[str, set[str | None]] = {
    "eager_attention": {"attention"},
    "rms_norm": {"norm"},
    "layer_norm": {"norm"},
    "rope": {"rope", "attention"},
    "gated_activation": {"activation"},
    "gemm_epilogue": {"activation", "attention", None},
}
PATTERN_TITLES = {
    "eager_attention": "Unfused attention (batched matmul + softmax + batched matmul)",
    "gemm_epilogue": "GEMM epilogue (elementwise ops after a GEMM)",
    "rms_norm": "Unfused RMSNorm",
    "layer_norm": "Unfused LayerNorm",
    "rope": "Unfused rotary embedding",
    "gated_activation": "Unfused gated activation",
    "elementwise_chain": "Elementwise chain",
}

Signature = tuple[str, str, tuple[str, ...]]  # (source, scope, kernel types of one instance)


class AttentionModel(BaseModel):
    """How a fused-attention candidate's time is projected: the batched matmuls' FLOPs at the
    efficiency fused attention reaches at this sequence length (TraceLens sdpa spec band)."""

    flops: float  # of the batched matmuls of every instance (QK^T and PV: 4 x B x H x Sq x Skv x D)
    compute_spec: str
    peak_tflops: float
    seq_len: int  # max(Sq, Skv) of the instance with the most FLOPs
    head_dim: int
    band_anchor: int
    efficiency_low_percent: float
    efficiency_high_percent: float
    fused_time_low_ms: float  # at the band's high efficiency
    fused_time_high_ms: float  # at the band's low efficiency

    def effective_percent(self, fused_ms: float) -> float:
        """The efficiency the whole group's fused time implies (each instance ran at its own band)."""
        return 100.0 * self.flops / (self.peak_tflops * 1e12 * fused_ms / 1000.0) if fused_ms > 0 else 0.0


class FusionCandidate(BaseModel):
    candidate_id: str
    name: str  # what the report calls it, e.g. "Unfused RMSNorm in Qwen2RMSNorm"
    pattern: str  # eager_attention | gemm_epilogue | rms_norm | layer_norm | rope | gated_activation | elementwise_chain | mixed
    source: str  # eager_attention | module | module_chain | op_subtree
    scope: str  # module class or op name the instances belong to
    module_chain: list[str]
    instance_count: int
    kernel_count: int  # kernels of one instance
    kernel_types: list[str]
    kernel_names: list[str]  # of the first instance, in launch order
    kernel_ops: list[str]  # the op of each of those kernels
    op_names: list[str]  # ops of the first instance, in launch order
    covered_ops: list[str]  # ops whose kernels a fused kernel removes (not the GEMMs it keeps)
    current_time_ms: float
    fused_time_ms: float  # current - mid savings
    savings_low_ms: float
    savings_mid_ms: float
    savings_high_ms: float
    percent_of_e2e: float
    impact_low: float
    impact_mid: float
    impact_high: float
    estimation: str  # measured | roofline | partial | flops
    attention_model: AttentionModel | None = None
    modeled_share: float  # share of chain time whose ops have bytes / FLOPs
    confidence: Confidence
    confidence_reason: str
    status: str  # estimated | rejected
    reject_reason: str | None = None
    example_op_ids: list[int]


@dataclass
class CandidateGroup:
    """A candidate with the instances it stands for and the time of each op a fused kernel removes."""

    candidate: FusionCandidate
    members: list[Instance]
    removed_time_us: dict[str, float]


def signature(instance: Instance) -> Signature:
    return (instance.source, instance.scope, tuple(k[4] for u in instance.units for k in u.kernels))


def _confidence(instance: Instance, est: Estimate, verdicts: dict[str, str]) -> tuple[Confidence, str]:
    """high needs an explicit op pattern, a module name that does not contradict it and (for
    roofline projections) perf models for most of the chain; trace timing problems lower it."""
    scope = instance.scope.lower()
    hint = next((k for k, words in NAME_HINTS.items() if any(w in scope for w in words)), None)
    pattern = est.pattern
    modeled_share = est.modeled_us / est.chain_us if est.chain_us else 1.0
    reasons = []
    families = PATTERN_FAMILIES.get(pattern)
    if families is not None:
        agree = hint is None or hint in families
        level: Confidence = "high" if agree and modeled_share >= settings.FUSION_MODELED_SHARE_HIGH else "medium"
        reasons.append(f"op composition matches {pattern.replace('_', ' ')}"
                       + ("" if hint is None else f"; module name suggests {hint}" + ("" if agree else " (disagrees)")))
        if est.measured:
            reasons.append("saving is measured kernel time")
    else:
        level = "medium" if modeled_share >= settings.FUSION_MODELED_SHARE_HIGH else "low"
        reasons.append("generic chain of elementwise ops, no named pattern")
    if est.chain_us:
        reasons.append(f"{100 * modeled_share:.0f} % of chain time has a perf model")
    warned = [c for c in FUSION_QUALITY_CHECKS if verdicts.get(c) in ("warn", "fail")]
    level = lowered(level, len(warned))
    if warned:
        reasons.append("lowered by trace-quality warnings: " + ", ".join(warned))
    return level, "; ".join(reasons)


def _attention_model(estimates: list[Estimate], platform: Platform) -> AttentionModel | None:
    """The group's fused-attention projection: each instance at the band of its own sequence
    length; the largest-FLOPs instance's band is the one quoted."""
    if not estimates or any(not e.flops for e in estimates):
        return None
    main = max(estimates, key=lambda e: e.flops)
    anchor, eff_low, eff_high = expected_attention_band(main.seq_len, main.head_dim)
    return AttentionModel(
        flops=sum(e.flops for e in estimates), compute_spec=main.compute_spec or "",
        peak_tflops=platform.peaks[main.compute_spec or ""], seq_len=main.seq_len, head_dim=main.head_dim,
        band_anchor=anchor, efficiency_low_percent=eff_low, efficiency_high_percent=eff_high,
        fused_time_low_ms=round(sum(e.fused_fast_us for e in estimates) / 1000.0, 4),
        fused_time_high_ms=round(sum(e.fused_slow_us for e in estimates) / 1000.0, 4))


def _merged_estimate(source: str, members: list[Instance], platform: Platform,
                     ctx: AnalysisContext) -> tuple[Estimate, list[Estimate]]:
    """The group's estimate (the members' savings summed) and each member's."""
    estimates = [estimate(i, platform) for i in members]
    if source == "eager_attention" and any(not e.flops for e in estimates):
        estimates = [attention_fallback(i.units) for i in members]  # one method for the whole group
    est0 = estimates[0]
    low = sum(e.low_us for e in estimates)
    mid = sum(e.mid_us for e in estimates)
    high = sum(e.high_us for e in estimates)
    pattern = est0.pattern
    if pattern == "rope" and not ctx.facts.has_rotary:
        pattern = "elementwise_chain"  # rotate-half-like ops, but no rotary embedding in the trace
    merged = Estimate(pattern, low, mid, high, modeled_us=sum(e.modeled_us for e in estimates),
                      chain_us=sum(e.chain_us for e in estimates),
                      measured=all(e.measured for e in estimates),
                      reject_reason=est0.reject_reason if high <= 0 else None)
    return merged, estimates


def _label(merged: Estimate, kernel_types: tuple[str, ...]) -> str:
    if merged.reject_reason:
        return f"Kernel group ({len(kernel_types)} kernels)"
    if merged.pattern == "elementwise_chain":
        # a GEMM before the chain stays a GEMM: it is no member of the elementwise chain
        members = sum(t not in MATRIX_KERNEL_TYPES for t in kernel_types)
        return f"Elementwise chain ({members} kernels)"
    return PATTERN_TITLES[merged.pattern]


def _estimation(attention: AttentionModel | None, merged: Estimate) -> str:
    if attention is not None:
        return "flops"
    if merged.measured:
        return "measured"
    return "roofline" if merged.chain_us and merged.modeled_us >= merged.chain_us * 0.999 else "partial"


def build_candidate(key: Signature, members: list[Instance], current_us: float, platform: Platform,
                    ctx: AnalysisContext, candidate_id: str) -> CandidateGroup:
    """The candidate of one signature's instances, which together take `current_us` of kernel time."""
    source, scope, types = key
    percent = 100.0 * current_us / 1000.0 / ctx.e2e_time_ms
    merged, estimates = _merged_estimate(source, members, platform, ctx)
    first = members[0]
    confidence, reason = _confidence(first, merged, ctx.quality_verdicts)
    attention = _attention_model(estimates, platform) if merged.pattern == "eager_attention" else None
    removed: dict[str, float] = defaultdict(float)
    for e in estimates:
        for u in e.removed:
            removed[u.name] += u.time_us
    low, mid, high, chain = merged.low_us, merged.mid_us, merged.high_us, merged.chain_us
    candidate = FusionCandidate(
        candidate_id=candidate_id,
        name=f"{_label(merged, types)} in {scope}",
        pattern=merged.pattern, source=source, scope=scope, module_chain=first.module_chain,
        instance_count=len(members), kernel_count=len(types), kernel_types=list(types),
        kernel_names=[k[1] for u in first.units for k in u.kernels],
        kernel_ops=[u.name for u in first.units for _ in u.kernels],
        op_names=[u.name for u in first.units],
        covered_ops=sorted(removed),
        current_time_ms=current_us / 1000.0,  # unrounded: the sum of the claimed kernels
        fused_time_ms=round((current_us - mid) / 1000.0, 4),
        savings_low_ms=round(low / 1000.0, 4), savings_mid_ms=round(mid / 1000.0, 4),
        savings_high_ms=round(high / 1000.0, 4),
        percent_of_e2e=round(percent, 3),
        impact_low=round(100.0 * low / 1000.0 / ctx.e2e_time_ms, 3),
        impact_mid=round(100.0 * mid / 1000.0 / ctx.e2e_time_ms, 3),
        impact_high=round(100.0 * high / 1000.0 / ctx.e2e_time_ms, 3),
        estimation=_estimation(attention, merged),
        attention_model=attention,
        modeled_share=round(merged.modeled_us / chain, 3) if chain else 1.0,
        confidence=confidence, confidence_reason=reason,
        status="rejected" if merged.reject_reason else "estimated",
        reject_reason=merged.reject_reason,
        example_op_ids=[u.op_id for u in first.units if u.op_id is not None][:FUSION_MAX_EXAMPLE_OPS],
    )
    return CandidateGroup(candidate, members, removed)
