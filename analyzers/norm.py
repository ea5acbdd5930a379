"""Normalization agent: batch / layer / group / instance / RMS norm, forward and backward. Norm
kernels are bandwidth-bound; the remedies are fused norm kernels and, for CNNs, channels-last."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice

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
ATTENTION_MODULE_MARKERS = ("attention", "attn")  # modules whose narrower norms are per-head q/k norms


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


def family(op: OpRecord) -> str:
    """A norm that already adds the residual in its kernel gets a card of its own: its advice differs."""
    return op.kind + ("+residual" if "residual_add" in op.fused_steps else "")


def _row_width(op: OpRecord) -> int | None:
    """The normalized (last) dimension of the op's first input."""
    dims = op.dims()
    return int(dims[0][-1]) if dims and isinstance(dims[0], list) and dims[0] else None


def is_qk_norm(op: OpRecord, ops: list[OpRecord]) -> bool:
    """A per-head q/k norm: inside an attention module and narrower than the trace's widest norm of
    its variant (the hidden size of the residual stream). It has no residual input."""
    width = _row_width(op)
    widest = max((w for o in ops if o.kind == op.kind and (w := _row_width(o)) is not None), default=None)
    in_attention = any(compute.name_matches(m, ATTENTION_MODULE_MARKERS) for m in op.module_chain[:-1])
    return in_attention and width is not None and widest is not None and width < widest


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which normalization advice applies to the group (a row of analyzers/advice/norm.toml), with its values."""
    dominant = group.dominant
    variant = dominant.kind
    pass_name = "backward" if dominant.op_category == "NORM_bwd" else "forward"
    if group.estimate_method == "heuristic":
        generic = compute.generic_advice(group, f"this {variant} {pass_name} op")
        return AdviceText(agent=AGENT_NAME, fact="unmodelled", values={"generic": generic})
    eff = group.weighted_efficiency
    values: dict[str, object] = {
        "pass_name": pass_name, "efficiency": eff,
        "suboptimal": eff is not None and eff < settings.NORM_KERNEL_SUBOPTIMAL_PERCENT,
    }
    if variant == "batchnorm":
        computation = data.ctx.computation_time_ms
        batchnorm_ops = [op for op in data.ops if op.kind == "batchnorm"]
        bn_share = 100.0 * sum(op.time_ms for op in batchnorm_ops) / computation if computation > 0 else 0.0
        # the sentence names this group's pass: its share is that pass's; the layout advice weighs both
        pass_share = (100.0 * sum(op.time_ms for op in batchnorm_ops if op.op_category == dominant.op_category)
                      / computation if computation > 0 else 0.0)
        nchw = [op for op in group.members if compute.tensor_layout(op) == "channels_first"]
        heavy = bn_share >= settings.BATCHNORM_CHANNELS_LAST_MIN_PERCENT
        return AdviceText(agent=AGENT_NAME, fact="batchnorm", values={
            **values, **compute.latency_values(group), "batchnorm_share": pass_share, "nchw_count": len(nchw),
            "member_count": len(group.members),
            "channels_last": bool(heavy or nchw), "inference": data.ctx.is_inference})
    return AdviceText(agent=AGENT_NAME, fact="row_norm", values={
        **values, **compute.latency_values(group), "variant": variant, "library": group.library,
        "compiled": data.ctx.facts.is_compiled, "name": dominant.name,
        "fused_residual": "residual_add" in dominant.fused_steps, "fused_quant": "norm_quant" in dominant.fused_steps,
        "qk_norm": is_qk_norm(dominant, data.ops)})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


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
            1 for op in ops
            if op.efficiency_percent is not None and op.efficiency_percent < settings.NORM_KERNEL_SUBOPTIMAL_PERCENT
        ),
        peak_hbm_tb_per_s=data.peak_hbm_tb_per_s,
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="normalization", classify=classify, advise=advise,
    family=family,
    fuses_latency_bound=lambda op: True,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Normalization findings: bandwidth gap per norm variant, fused-norm and channels-last actions."""
    return compute.run_agent(db, ctx, AGENT, NormMetrics, facts)
