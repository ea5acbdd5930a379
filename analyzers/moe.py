"""Mixture-of-experts agent: fused and unfused expert computation, routing / auxiliary ops and
token dispatch / combine."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice
from tracelake.core.kernel_names import short_kernel_name

AGENT_NAME = "moe"
TIER = "compute"
DISPLAY_NAME = "Mixture of Experts"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
KIND_BY_CATEGORY = {
    "MoE_fused": "fused", "MoE_unfused": "unfused", "MoE_aux": "routing",
    "MoE_comm_fwd": "dispatch", "MoE_comm_bwd": "dispatch",
}
TWO_STAGE_KERNEL_MARKERS = ("gemm1", "gemm2")  # TraceLens moe spec: *_gemm1_* then *_gemm2_* -> unfused multi-stage
NO_PRECISION_ADVICE = ("fp4",)  # TraceLens moe spec: never suggest lower precision at FP4


class MoeFacts(BaseModel):
    kind_counts: dict[str, int]
    kind_time_ms: dict[str, float]
    precision_counts: dict[str, int]  # fp4 / fp8 / bf16 ... from compute spec, kernel names or dtypes
    two_stage_unfused_count: int  # unfused ops whose kernels show a gemm1 / gemm2 split
    peak_matrix_bf16_tflops: float | None
    peak_matrix_fp8_tflops: float | None
    peak_hbm_tb_per_s: float | None


class MoeMetrics(ComputeMetrics):
    category_specific: MoeFacts


def classify(op: OpRecord) -> str:
    return KIND_BY_CATEGORY.get(op.op_category, "other")


def precision(op: OpRecord) -> str:
    spec = op.compute_spec or ""
    for p in ("fp4", "fp8", "int8", "bf16", "fp16", "fp32"):
        if p in spec or op.kernel_precision == p or p in op.name.lower():
            return p
    dtypes = [compute.dtype_name(t) for t in op.dtypes()]
    return next((d for d in dtypes if d), "unknown")


def _two_stage(op: OpRecord) -> bool:
    names = " ".join(k.name.lower() for k in op.kernels)
    return all(marker in names for marker in TWO_STAGE_KERNEL_MARKERS)


def _fp8_speedup(prec: str, data: AgentData) -> float | None:
    """How much FP8 expert weights raise the compute ceiling, when the weights are bf16 / fp16."""
    bf16, fp8 = data.platform_peaks.get("matrix_bf16"), data.platform_peaks.get("matrix_fp8")
    ratio = fp8 / bf16 if bf16 and fp8 else None
    return ratio if prec not in NO_PRECISION_ADVICE and prec in ("bf16", "fp16") and ratio else None


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which MoE advice applies to the group (a row of analyzers/advice/moe.toml), with its values."""
    dominant = group.dominant
    kind = dominant.kind
    memory_bound = group.bound == "memory"
    if kind in ("dispatch", "routing"):
        return AdviceText(agent=AGENT_NAME, fact=kind)
    if kind == "unfused" or any(_two_stage(op) for op in group.members):
        return AdviceText(agent=AGENT_NAME, fact="unfused", values={"memory_bound": memory_bound})
    runs_moe_kernels = dominant.kernel_category_shares.get("MoE", 0.0) > settings.RELABEL_MIN_KERNEL_SHARE
    if group.estimate_method == "heuristic" and runs_moe_kernels:
        kernel = short_kernel_name(dominant.kernels[0].name, 60) if dominant.kernels else dominant.name
        return AdviceText(agent=AGENT_NAME, fact="fused_without_shapes", values={
            "kernel": kernel, "attribution_hint": compute.attribution_hint(data.ctx)})
    if group.estimate_method == "heuristic":
        return AdviceText(agent=AGENT_NAME, fact="unmodelled", values={
            "memory_bound": memory_bound, "generic": compute.generic_advice(group, "the expert computation")})
    prec = precision(dominant)
    if group.bound == "compute":
        return AdviceText(agent=AGENT_NAME, fact="fused_compute_bound",
                          values={"precision": prec, "fp8_speedup": _fp8_speedup(prec, data)})
    return AdviceText(agent=AGENT_NAME, fact="fused_memory_bound", values={"precision": prec, "memory_bound": memory_bound})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def facts(data: AgentData) -> MoeFacts:
    ops = data.ops
    counts, times = compute.kind_totals(ops)
    precisions: dict[str, int] = {}
    for op in ops:
        p = precision(op)
        precisions[p] = precisions.get(p, 0) + 1
    return MoeFacts(
        kind_counts=counts,
        kind_time_ms=times,
        precision_counts=precisions,
        two_stage_unfused_count=sum(1 for op in ops if op.kind == "unfused" and _two_stage(op)),
        peak_matrix_bf16_tflops=data.platform_peaks.get("matrix_bf16"),
        peak_matrix_fp8_tflops=data.platform_peaks.get("matrix_fp8"),
        peak_hbm_tb_per_s=data.peak_hbm_tb_per_s,
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="MoE", classify=classify, advise=advise,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """MoE findings: fused / unfused expert compute, routing and dispatch; NO_DATA without MoE ops."""
    return compute.run_agent(db, ctx, AGENT, MoeMetrics, facts)
