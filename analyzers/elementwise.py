"""Elementwise agent: pointwise ops (copies, casts, arithmetic, activations, masks). They are
memory-bound by nature; the usual remedy is fewer passes over memory (fusion) and fewer launches."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice

AGENT_NAME = "elementwise"
TIER = "compute"
DISPLAY_NAME = "Elementwise"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
# TraceLens elementwise spec member classes (by op name, namespace and in-place suffix removed)
KIND_NAMES: dict[str, tuple[str, ...]] = {
    "baseline": ("add", "mul", "copy", "fill", "zero", "zeros", "ones", "clone", "contiguous"),
    "cast": ("to", "to_copy", "type_as", "float", "half", "bfloat16"),
    "activation": ("sigmoid", "relu", "gelu", "silu", "swish", "tanh", "mish", "hardswish", "leaky_relu", "threshold_backward",
                   "gelu_backward", "silu_backward", "sigmoid_backward"),
    "math": ("exp", "log", "pow", "sqrt", "rsqrt", "reciprocal", "erf", "sin", "cos"),
    "mask": ("where", "masked_fill", "eq", "ne", "gt", "lt", "ge", "le", "logical_and", "logical_or", "logical_not"),
    "arithmetic": ("sub", "div", "remainder", "fmod", "neg", "abs", "clamp", "rsub", "addcmul", "addcdiv", "lerp"),
}
NORM_MODULE_MARKERS = ("norm",)  # module names whose elementwise ops are pieces of an unfused normalization
ATTENTION_MODULE_MARKERS = ("attention", "attn", "rotary")  # rotary advice itself needs workload_facts.has_rotary
ATTENTION_LAYOUT_OPS = {"copy", "contiguous", "clone", "transpose", "permute", "to", "_to_copy", "to_copy"}
ROTARY_OPS = {"mul", "add", "neg", "cat", "sub"}  # the ops of an eager rotate-half rotary embedding


class ElementwiseFacts(BaseModel):
    kind_counts: dict[str, int]
    kind_time_ms: dict[str, float]
    baseline_weighted_efficiency_percent: float | None  # add / mul / copy / fill, time-weighted % of roofline
    high_invocation_op_count: int  # signatures with more than settings.HIGH_INVOCATION_CALLS calls
    short_kernel_op_count: int  # signatures whose mean kernel time is under SHORT_KERNEL_US
    cast_time_ms: float
    fp32_op_count: int  # signatures computing in fp32 (often an upcast inside a norm)
    in_norm_module_time_ms: float
    peak_hbm_tb_per_s: float | None


class ElementwiseMetrics(ComputeMetrics):
    category_specific: ElementwiseFacts


def classify(op: OpRecord) -> str:
    base = compute.base_op_name(op.name)
    for kind, names in KIND_NAMES.items():
        if base in names:
            return kind
    return "other"


def family(op: OpRecord) -> str:
    """Baseline and arithmetic ops share a card; casts, activations, math, masks and the already
    fused gated activations get their own."""
    if "gated_activation" in op.fused_steps:
        return "fused_activation"
    return "simple" if op.kind in ("baseline", "arithmetic") else op.kind


def _in_modules(op: OpRecord, markers: tuple[str, ...]) -> bool:
    return any(compute.name_matches(module, markers) for module in op.module_chain)


def _mostly_in(ops: list[OpRecord], group: OpGroup) -> bool:
    return bool(ops) and sum(op.time_ms for op in ops) >= group.time_ms / 2


def _where_the_time_goes(group: OpGroup, ctx: AnalysisContext) -> str:
    """The fact (a row of analyzers/advice/elementwise.toml) of a modelled group."""
    if "gated_activation" in group.dominant.fused_steps:
        return "fused_activation"
    in_norm = [op for op in group.members if _in_modules(op, NORM_MODULE_MARKERS)]
    # the attention-module wording is about its layout copies and rotary ops, not a residual add
    in_attention = [op for op in group.members if _in_modules(op, ATTENTION_MODULE_MARKERS)
                    and (compute.base_op_name(op.name) in ATTENTION_LAYOUT_OPS
                         or (ctx.facts.has_rotary and compute.base_op_name(op.name) in ROTARY_OPS))]
    if _mostly_in(in_norm, group):
        return "norm_module"
    if group.family in ("cast", "activation"):
        return group.family
    if _mostly_in(in_attention, group):
        return "attention_rotary" if ctx.facts.has_rotary else "attention_layout"
    return "outside_compiled" if ctx.facts.is_compiled else "pointwise"


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which elementwise advice applies to the group (a row of analyzers/advice/elementwise.toml), with its values."""
    ctx = data.ctx
    short_count = sum(1 for op in group.members if op.mean_us < settings.SHORT_KERNEL_US)
    if group.estimate_method == "heuristic":
        generic = compute.generic_advice(group, f"`{group.dominant.name}`")
        return AdviceText(agent=AGENT_NAME, fact="unmodelled", values={"short_count": short_count, "generic": generic})
    eff = group.weighted_efficiency or 0.0
    return AdviceText(agent=AGENT_NAME, fact=_where_the_time_goes(group, ctx), values={
        **compute.latency_values(group), "name": group.dominant.name, "module": compute.module_hint(group),
        "efficiency": eff, "short_count": short_count,
        "calls": group.call_count, "compiled": ctx.facts.is_compiled, "rotary_example": ctx.facts.rotary_example,
        "many_launches": any(op.count > settings.HIGH_INVOCATION_CALLS for op in group.members),
        "low_baseline": group.family == "simple" and eff < settings.BASELINE_EFFICIENCY_MIN_PERCENT})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def facts(data: AgentData) -> ElementwiseFacts:
    ops = data.ops
    counts, times = compute.kind_totals(ops)
    baseline = [op for op in ops if op.kind == "baseline" and op.efficiency_percent is not None]
    baseline_time = sum(op.time_ms for op in baseline)
    return ElementwiseFacts(
        kind_counts=counts,
        kind_time_ms=times,
        baseline_weighted_efficiency_percent=(
            sum((op.efficiency_percent or 0.0) * op.time_ms for op in baseline) / baseline_time if baseline_time > 0 else None
        ),
        high_invocation_op_count=sum(1 for op in ops if op.count > settings.HIGH_INVOCATION_CALLS),
        short_kernel_op_count=sum(1 for op in ops if op.mean_us < settings.SHORT_KERNEL_US),
        cast_time_ms=times.get("cast", 0.0),
        fp32_op_count=sum(1 for op in ops if (op.compute_spec or "").endswith("fp32")),
        in_norm_module_time_ms=sum(op.time_ms for op in ops if _in_modules(op, NORM_MODULE_MARKERS)),
        peak_hbm_tb_per_s=data.peak_hbm_tb_per_s,
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="elementwise",
    classify=classify, advise=advise, family=family,
    fuses_latency_bound=lambda op: True,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Elementwise findings: bandwidth gap per op class, with fusion and batching actions."""
    return compute.run_agent(db, ctx, AGENT, ElementwiseMetrics, facts)
