"""Normalization agent: batch / layer / group / instance / RMS norm, forward and backward. Norm
kernels are bandwidth-bound; the remedies are fused norm kernels and, for CNNs, channels-last."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

AGENT_NAME = "norm"
TIER = "compute"
DISPLAY_NAME = "Normalization"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
VARIANTS = (  # TraceLens norm spec member classes, first match on the lower-cased op name
    ("rmsnorm", ("rms_norm", "rmsnorm")),
    ("batchnorm", ("batch_norm", "batchnorm")),
    ("layernorm", ("layer_norm", "layernorm", "ln_")),
    ("groupnorm", ("group_norm", "groupnorm")),
    ("instancenorm", ("instance_norm", "instancenorm")),
)


class NormFacts(BaseModel):
    variant_counts: dict[str, int]
    variant_time_ms: dict[str, float]
    forward_time_ms: float
    backward_time_ms: float
    batchnorm_percent_of_computation: float | None
    channels_last_count: int  # signatures whose 4-D input has channel stride 1 (NHWC)
    channels_first_count: int  # 4-D inputs in NCHW
    below_suboptimal_threshold_count: int  # modelled signatures under settings.NORM_KERNEL_SUBOPTIMAL_PERCENT of roofline
    peak_hbm_tb_per_s: float | None


class NormMetrics(ComputeMetrics):
    category_specific: NormFacts


def classify(op: OpRecord) -> str:
    lowered = op.name.lower() + " " + " ".join(op.module_chain[-1:]).lower()
    for variant, markers in VARIANTS:
        if any(m in lowered for m in markers):
            return variant
    return "other"




def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    variant = dominant.kind
    backward = dominant.op_category == "NORM_bwd"
    eff = group.weighted_efficiency
    pass_text = "backward" if backward else "forward"
    if group.estimate_method == "heuristic":
        advice = compute.generic_advice(group, f"this {variant} {pass_text} op")
        return Advice(insight="", action=advice.action, reasoning=advice.reasoning, resolution=advice.resolution)
    suboptimal = eff is not None and eff < settings.NORM_KERNEL_SUBOPTIMAL_PERCENT
    eff_text = (
        f" At {eff:.1f} % of the bandwidth roofline (below {settings.NORM_KERNEL_SUBOPTIMAL_PERCENT:.0f} %) the norm kernel itself is "
        "far from streaming at HBM speed." if suboptimal and eff is not None else ""
    )
    if variant == "batchnorm":
        computation = data.ctx.computation_time_ms
        bn_share = 100.0 * sum(op.time_ms for op in data.ops if op.kind == "batchnorm") / computation if computation > 0 else 0.0
        nchw = [op for op in group.members if compute.tensor_layout(op) == "channels_first"]
        layout_text = f" {len(nchw)} of the {len(group.members)} inputs are in NCHW (channels-first) layout." if nchw else ""
        heavy = bn_share >= settings.BATCHNORM_CHANNELS_LAST_MIN_PERCENT
        return Advice(
            insight=(
                f"BatchNorm {pass_text} takes {bn_share:.1f} % of the GPU computation time.{eff_text}{layout_text}"
            ),
            action=(
                ("Switch the model and inputs to channels-last (NHWC) memory format so BatchNorm and the convolutions "
                 "use per-channel-contiguous kernels, and fuse BatchNorm with the following activation"
                 if heavy or nchw else "Fuse BatchNorm with the following activation")
                + (" (or fold it into the convolution: the weights are frozen at inference)." if data.ctx.is_inference
                   else ".")
            ),
            reasoning=(
                "BatchNorm reads the activation once for the per-channel statistics and again to normalise; in NCHW the "
                "per-channel reduction walks strided memory."
            ),
            resolution=(
                "Channels-last makes each channel's values contiguous per pixel and lets one kernel compute statistics and "
                "apply the affine transform with coalesced accesses; fusing the activation removes one more pass."
            ),
        )
    return Advice(
        insight=f"{variant.capitalize()} {pass_text} on {group.library} kernels.{eff_text}",
        action=(
            "Use a fused normalization kernel that also applies the residual add and the following activation / "
            "quantization (vendor or framework fused norm" + compute.unless_compiled(data.ctx, ", or compile the block") + ")."
        ),
        reasoning="A norm is bandwidth-bound: one read of the row for the statistics, one for the scaling, one write.",
        resolution="A fused norm reads each row once and writes once, and absorbs the neighbouring pointwise ops.",
    )


def facts(data: AgentData) -> NormFacts:
    ops = data.ops
    counts, times = compute.kind_totals(ops)
    computation = data.ctx.computation_time_ms
    return NormFacts(
        variant_counts=counts,
        variant_time_ms=times,
        forward_time_ms=sum(op.time_ms for op in ops if op.op_category != "NORM_bwd"),
        backward_time_ms=sum(op.time_ms for op in ops if op.op_category == "NORM_bwd"),
        batchnorm_percent_of_computation=(100.0 * times.get("batchnorm", 0.0) / computation) if computation > 0 and ops else None,
        channels_last_count=sum(1 for op in ops if compute.tensor_layout(op) == "channels_last"),
        channels_first_count=sum(1 for op in ops if compute.tensor_layout(op) == "channels_first"),
        below_suboptimal_threshold_count=sum(
            1 for op in ops if op.efficiency_percent is not None and op.efficiency_percent < settings.NORM_KERNEL_SUBOPTIMAL_PERCENT
        ),
        peak_hbm_tb_per_s=data.peak_hbm_tb_per_s,
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="normalization", classify=classify, advise=advise,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Normalization findings: bandwidth gap per norm variant, fused-norm and channels-last actions."""
    return compute.run_agent(db, ctx, AGENT, NormMetrics, facts)
