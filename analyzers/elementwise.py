"""Elementwise agent: pointwise ops (copies, casts, arithmetic, activations, masks). They are
memory-bound by nature; the usual remedy is fewer passes over memory (fusion) and fewer launches."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

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
    """Baseline and arithmetic ops share a card; casts, activations, math and masks get their own."""
    return "simple" if op.kind in ("baseline", "arithmetic") else op.kind


def _in_modules(op: OpRecord, markers: tuple[str, ...]) -> bool:
    return any(compute.name_matches(module, markers) for module in op.module_chain)


def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    ctx = data.ctx
    module = compute.module_hint(group)
    where = f" in `{module}`" if module else ""
    calls = group.call_count
    short = [op for op in group.members if op.mean_us < settings.SHORT_KERNEL_US]
    launch = (
        f" {len(short)} of these ops average under {settings.SHORT_KERNEL_US:.0f} µs per call, so launch overhead matters as much as bandwidth."
        if short else ""
    )
    many = any(op.count > settings.HIGH_INVOCATION_CALLS for op in group.members)
    in_norm = [op for op in group.members if _in_modules(op, NORM_MODULE_MARKERS)]
    in_attention = [op for op in group.members if _in_modules(op, ATTENTION_MODULE_MARKERS)]
    # the attention-module wording is about its layout copies and rotary ops, not a residual add
    in_attention = [op for op in in_attention if compute.base_op_name(op.name) in ATTENTION_LAYOUT_OPS
                    or (ctx.facts.has_rotary and compute.base_op_name(op.name) in ROTARY_OPS)]
    if group.estimate_method == "heuristic":
        advice = compute.generic_advice(group, f"`{dominant.name}`")
        return Advice(insight=launch.strip(), action=advice.action, reasoning=advice.reasoning, resolution=advice.resolution)
    eff = group.weighted_efficiency or 0.0
    if in_norm and sum(op.time_ms for op in in_norm) >= group.time_ms / 2:
        pattern = (
            f"Most of this time is inside normalization modules ({module or 'norm'}): the norm runs as separate "
            "pointwise kernels (upcast, square, scale, multiply by weight)."
        )
        action = ("Use a fused normalization kernel (fused RMSNorm / LayerNorm) instead of the pointwise composition"
                  + compute.unless_compiled(ctx, ", or compile the norm module") + ".")
    elif group.family == "cast":
        pattern = f"Dtype conversions{where} move each tensor twice (read one precision, write another)."
        action = "Keep tensors in one precision across the region, or let the producer write the target dtype (fuse the cast into the producing kernel)."
    elif group.family == "activation":
        pattern = f"Activations{where} run as separate kernels after the GEMM that produces their input."
        action = ("Fuse the activation into the GEMM epilogue or into a fused gated-activation kernel (e.g. SiLU-and-multiply)"
                  + compute.unless_compiled(ctx, ", or compile the block") + ".")
    elif in_attention and sum(op.time_ms for op in in_attention) >= group.time_ms / 2 and ctx.facts.has_rotary:
        pattern = (f"Most of this time is inside attention modules ({module}), where the trace has a rotary embedding "
                   f"(`{ctx.facts.rotary_example}`): rotary embedding and layout copies run as separate kernels.")
        action = ("Use a fused rotary-embedding kernel and avoid `.contiguous()` copies of Q/K/V before attention"
                  + compute.unless_compiled(ctx, "; compile the attention block") + ".")
    elif in_attention and sum(op.time_ms for op in in_attention) >= group.time_ms / 2:
        pattern = (f"Most of this time is inside attention modules ({module}): layout copies and the separate scale / "
                   "mask / transpose ops of the attention run as their own kernels.")
        action = ("Avoid `.contiguous()` copies of Q/K/V before attention: pass the strided tensors to one fused "
                  "scaled-dot-product attention call" + compute.unless_compiled(ctx, ", or compile the attention block") + ".")
    elif ctx.facts.is_compiled:
        pattern = f"These are simple pointwise ops{where} at {eff:.1f} % of HBM bandwidth on average, outside the compiled regions."
        action = ("Bring them into a compiled region (look for graph breaks around them) or fuse them into the "
                  "neighbouring kernel by hand, so intermediates stay in registers.")
    else:
        pattern = f"These are simple pointwise ops{where} at {eff:.1f} % of HBM bandwidth on average."
        action = "Fuse chains of pointwise ops (torch.compile or a hand-written fused kernel) so intermediates stay in registers."
    if many:
        action += " Batch the many identical launches (foreach / multi-tensor ops, GPU graphs)."
    low_baseline = group.family == "simple" and eff < settings.BASELINE_EFFICIENCY_MIN_PERCENT
    reasoning = (
        "Elementwise ops do almost no math per byte, so each one costs a full read and write of its tensors; "
        + (f"the simplest ops reach only {eff:.1f} % of the bandwidth roofline (below the {settings.BASELINE_EFFICIENCY_MIN_PERCENT:.0f} % "
           "expected), which points to small tensors, broadcasts or strided inputs rather than the kernel's math."
           if low_baseline else "a chain of them multiplies that traffic.")
    )
    return Advice(
        insight=f"{pattern}{launch} {calls} calls in total.",
        action=action,
        reasoning=reasoning,
        resolution=(
            "A fused kernel reads the inputs once, keeps intermediates on chip and writes one result, removing the "
            "intermediate write-back and a launch per op."
        ),
    )


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
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Elementwise findings: bandwidth gap per op class, with fusion and batching actions."""
    return compute.run_agent(db, ctx, AGENT, ElementwiseMetrics, facts)
