"""Mixture-of-experts agent: fused and unfused expert computation, routing / auxiliary ops and
token dispatch / combine."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
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


def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    kind = dominant.kind
    caveat = (
        " The bytes (and so TB/s and efficiency) assume uniform routing of tokens to experts; the FLOPs are exact."
        if group.bound == "memory" else ""
    )
    if kind == "dispatch":
        return Advice(
            insight="Token dispatch / combine moves activations to and from the experts.",
            action="Overlap dispatch and combine with expert computation (split the batch into chunks) and keep the permutation on device.",
            reasoning="Dispatch and combine are pure data movement; when serialised with the expert GEMMs they add directly to the step time.",
            resolution="Chunked overlap hides the movement behind computation of the previous chunk.",
        )
    if kind == "routing":
        return Advice(
            insight="Routing (top-k, gating, histogram) runs as separate small kernels.",
            action="Use a fused routing kernel (gating, top-k and permutation in one launch) from the MoE library in use.",
            reasoning="Routing kernels are tiny and launch-bound; each one costs a launch and a pass over the router logits.",
            resolution="A fused router replaces several launches and intermediate tensors with one kernel.",
        )
    if kind == "unfused" or any(_two_stage(op) for op in group.members):
        return Advice(
            insight=f"The expert computation runs as separate stages (gate/up GEMM, activation, down GEMM).{caveat}",
            action="Switch to a fused MoE kernel that runs both expert GEMMs and the activation in one launch.",
            reasoning="Separate stages write the intermediate expert activations to memory and launch once per stage.",
            resolution="A fused MoE kernel keeps the intermediate in on-chip memory and removes the extra launches.",
        )
    if group.estimate_method == "heuristic" and dominant.kernel_category_shares.get("MoE", 0.0) > settings.RELABEL_MIN_KERNEL_SHARE:
        kernel = short_kernel_name(dominant.kernels[0].name, 60) if dominant.kernels else dominant.name
        return Advice(
            insight=(f"The experts already run fused MoE library kernels (`{kernel}`); the trace shows no expert weight "
                     "shapes, so no perf model bounds them and only their time share is known."),
            action=(f"Get the expert shapes first ({compute.attribution_hint(data.ctx)}) for a measured distance to the "
                    "roofline; meanwhile compare the serving engine's MoE backends for this expert count and precision."),
            reasoning=("Without the expert count per token and the weight shapes there is no byte or FLOP count, so whether "
                       "the weight reads or the math bound these kernels is unknown."),
            resolution="With shapes, the MoE gets a perf model and a measured distance to its roofline.",
        )
    if group.estimate_method == "heuristic":
        advice = compute.generic_advice(group, "the expert computation")
        return Advice(insight=caveat.strip(), action=advice.action, reasoning=advice.reasoning, resolution=advice.resolution)
    prec = precision(dominant)
    if group.bound == "compute":
        ratio = None
        bf16, fp8 = data.platform_peaks.get("matrix_bf16"), data.platform_peaks.get("matrix_fp8")
        if bf16 and fp8:
            ratio = fp8 / bf16
        narrow = prec not in NO_PRECISION_ADVICE and prec in ("bf16", "fp16") and ratio
        return Advice(
            insight=f"Fused MoE, compute-bound, {prec} weights.",
            action=(
                "Tune the fused MoE kernel's tile configuration for this expert count and hidden size"
                + (f"; if accuracy allows, FP8 expert weights raise the compute ceiling {ratio:.1f}x." if narrow else ".")
            ),
            reasoning="The expert GEMMs are large enough to be limited by the matrix FLOP rate.",
            resolution="A tuned tile configuration raises the achieved FLOP rate; narrower precision raises the peak itself.",
        )
    return Advice(
        insight=f"Fused MoE, memory-bound, {prec} weights: each expert's weights are read for few tokens.{caveat}",
        action="Batch more tokens per step so each expert's weights serve more tokens, and check the expert weights are read once per step.",
        reasoning="With few tokens per expert the weight reads dominate the bytes moved.",
        resolution="More tokens per expert raise the arithmetic intensity towards the compute-bound regime.",
    )


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
