"""GEMM agent: dense, batched, grouped and quantized matrix multiplies, plus ops labelled `other`
whose kernels are GEMMs (re-labelled)."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice

AGENT_NAME = "gemm"
TIER = "compute"
DISPLAY_NAME = "GEMM"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
QUANTIZED_NAME_MARKERS = ("w8a8", "int8", "fp8", "w4a16", "w4a4", "fp4", "mxfp4")  # TraceLens gemm_analysis classifier
LOW_PRECISION = ("fp8", "fp4", "int8")  # kernel / compute-spec precisions counted as quantized


class GemmFacts(BaseModel):
    quantized_count: int  # signatures with fp8 / fp4 / int8 operands, kernels or name markers
    missing_perf_model_count: int  # signatures without FLOP / byte model (re-labelled graph GEMMs included)
    relabelled_count: int
    batched_count: int
    grouped_count: int
    misaligned_count: int  # modelled GEMMs with M, N or K not a multiple of settings.GEMM_ALIGNMENT
    dominant_library: str | None
    library_time_ms: dict[str, float]
    compute_bound_count: int
    memory_bound_count: int
    peak_matrix_bf16_tflops: float | None
    peak_matrix_fp8_tflops: float | None


class GemmMetrics(ComputeMetrics):
    category_specific: GemmFacts


def mnk(op: OpRecord) -> tuple[int, int, int] | None:
    params = op.perf_params or {}
    try:
        return int(params["M"]), int(params["N"]), int(params["K"])
    except (KeyError, TypeError, ValueError):
        return None


def is_quantized(op: OpRecord) -> bool:
    if compute.name_matches(op.name, QUANTIZED_NAME_MARKERS):
        return True
    if op.kernel_precision in LOW_PRECISION:
        return True
    spec = op.compute_spec or ""
    if any(p in spec for p in LOW_PRECISION):
        return True
    return any(compute.dtype_name(t) in LOW_PRECISION for t in op.dtypes())


def classify(op: OpRecord) -> str:
    if is_quantized(op):
        return "quantized"
    if op.op_category.startswith("GroupedGEMM"):
        return "grouped"
    if op.relabelled_from:
        return "relabelled"
    params = op.perf_params or {}
    if compute.base_op_name(op.name) in ("bmm", "baddbmm") or int(params.get("B", 1) or 1) > 1:
        return "batched"
    return "dense"


def misaligned_dims(op: OpRecord) -> list[str]:
    dims = mnk(op)
    if dims is None:
        return []
    return [f"{label}={value}" for label, value in zip("MNK", dims) if value % settings.GEMM_ALIGNMENT != 0]


def _shape_phrase(op: OpRecord) -> str:
    dims = mnk(op)
    return f"M={dims[0]} N={dims[1]} K={dims[2]}" if dims else (op.shape or "no shape")


def _ridge(op: OpRecord) -> float | None:
    """FLOP/byte where the op's roofline turns from memory- to compute-bound."""
    if op.peak_tflops and op.peak_tb_per_s:
        return op.peak_tflops / op.peak_tb_per_s
    return None


def _bytes_per_weight(op: OpRecord) -> float:
    """Bytes of one element of the op's weight operand (its second input's dtype; 2 when unknown)."""
    dtypes = op.dtypes()
    name = compute.dtype_name(dtypes[1]) if len(dtypes) > 1 else None
    return {"fp32": 4.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5}.get(name or "", 2.0)


def _fp8_ratio(data: AgentData) -> float | None:
    bf16 = data.platform_peaks.get("matrix_bf16")
    fp8 = data.platform_peaks.get("matrix_fp8")
    return fp8 / bf16 if bf16 and fp8 else None


def _misaligned(group: OpGroup) -> dict[str, object] | None:
    """The shapes with a dimension off settings.GEMM_ALIGNMENT: how many, and the first one."""
    misaligned = {op.name + " " + _shape_phrase(op): misaligned_dims(op) for op in group.members if misaligned_dims(op)}
    if not misaligned:
        return None
    example, dims = next(iter(misaligned.items()))
    return {"count": len(misaligned), "total": len(group.members), "dims": dims, "example": example}


def _tiny_m_ops(group: OpGroup) -> list[OpRecord]:
    """The members with M or N of at most settings.TINY_GEMM_DIM_MAX, longest first, when they hold
    most ("most": RELABEL_MIN_KERNEL_SHARE) of the group's time; else none."""
    small = [op for op in group.members if (d := mnk(op)) and min(d[0], d[1]) <= settings.TINY_GEMM_DIM_MAX]
    if not small or sum(op.time_ms for op in small) <= settings.RELABEL_MIN_KERNEL_SHARE * group.time_ms:
        return []
    return sorted(small, key=lambda op: -op.time_ms)


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which GEMM advice applies to the group (a row of analyzers/advice/gemm.toml), with its values."""
    dominant = group.dominant
    misaligned = _misaligned(group)
    if group.estimate_method == "heuristic":
        kernel = dominant.kernels[0].name if dominant.kernels else dominant.name
        return AdviceText(agent=AGENT_NAME, fact="no_shapes", values={
            "kernel": kernel, "misaligned": misaligned, "attribution_hint": compute.attribution_hint(data.ctx)})
    if group.bound == "compute":
        near = (group.weighted_efficiency or 0.0) >= dominant.attainable_percent - settings.NEAR_ATTAINABLE_MARGIN_PERCENT
        ratio = _fp8_ratio(data)
        fp8_applies = (dominant.kind != "quantized" and ratio and (dominant.compute_spec or "").endswith(("bf16", "fp16"))
                       and dominant.mean_us >= settings.FP8_MIN_KERNEL_US)
        return AdviceText(agent=AGENT_NAME, fact="compute_bound", values={
            "flops_per_byte": dominant.flops_per_byte, "shape": _shape_phrase(dominant),
            "efficiency": compute.efficiency_phrase(group), "near_attainable": near,
            "attainable_percent": dominant.attainable_percent, "misaligned": misaligned,
            "fp8_speedup": ratio if fp8_applies else None, "platform": data.ctx.platform,
            "roofline_gpu": data.ctx.roofline_gpu})
    decode = "decode" in data.ctx.phases.phase_names
    dims = mnk(dominant)
    if decode and dims and dims[0] <= settings.DECODE_GEMM_MAX_M and dominant.kind != "quantized":
        return AdviceText(agent=AGENT_NAME, fact="decode_weights", values={
            "flops_per_byte": dominant.flops_per_byte, "shape": _shape_phrase(dominant), "m": dims[0],
            "weight_mib": dims[1] * dims[2] * _bytes_per_weight(dominant) / 2**20,
            "ridge": _ridge(dominant), "compute_spec": dominant.compute_spec, "misaligned": misaligned})
    small = _tiny_m_ops(group)
    if small:
        return AdviceText(agent=AGENT_NAME, fact="tiny_m", values={
            "small_count": len(small), "example_shape": _shape_phrase(small[0]),
            "many_calls": sum(op.count for op in small) >= settings.TINY_GEMM_MIN_CALLS,
            # M is a token batch only in a serving step (prefill / decode); elsewhere (a diffusion
            # modulation GEMM on one conditioning vector) batching is not the user's to change
            "token_batch": bool(set(data.ctx.phases.phase_names) & {"prefill", "decode", "mixed"})})
    return AdviceText(agent=AGENT_NAME, fact="memory_bound", values={
        "flops_per_byte": dominant.flops_per_byte, "shape": _shape_phrase(dominant), "misaligned": misaligned,
        "small_calls": dominant.mean_us < settings.SMALL_GEMM_CALL_US, "mean_us": dominant.mean_us,
        "epilogue_fusion": (dominant.flops_per_byte or 0.0) < settings.EPILOGUE_FUSION_MAX_FLOPS_PER_BYTE,
        "ridge": _ridge(dominant), "compute_spec": dominant.compute_spec, "roofline_gpu": data.ctx.roofline_gpu})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def facts(data: AgentData) -> GemmFacts:
    ops = data.ops
    library_time: dict[str, float] = {}
    for op in ops:
        library_time[op.library] = library_time.get(op.library, 0.0) + op.time_ms
    return GemmFacts(
        quantized_count=sum(1 for op in ops if is_quantized(op)),
        missing_perf_model_count=sum(1 for op in ops if not op.has_perf_model),
        relabelled_count=sum(1 for op in ops if op.relabelled_from),
        batched_count=sum(1 for op in ops if op.kind == "batched"),
        grouped_count=sum(1 for op in ops if op.kind == "grouped"),
        misaligned_count=sum(1 for op in ops if misaligned_dims(op)),
        dominant_library=max(library_time, key=library_time.__getitem__) if library_time else None,
        library_time_ms=library_time,
        compute_bound_count=sum(1 for op in ops if op.bound == "compute"),
        memory_bound_count=sum(1 for op in ops if op.bound == "memory"),
        peak_matrix_bf16_tflops=data.platform_peaks.get("matrix_bf16"),
        peak_matrix_fp8_tflops=data.platform_peaks.get("matrix_fp8"),
    )


def exclude(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, ops: list[OpRecord]) -> dict[str, str]:
    eager = compute.eager_attention_ops(db, ctx)
    return {op.signature_key: compute.EAGER_ATTENTION_NOTE for op in ops if op.signature_key in eager}


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="GEMM",
    classify=classify, advise=advise, exclude=exclude,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """GEMM findings for one trace: roofline gap per shape, grouped into P-items."""
    return compute.run_agent(db, ctx, AGENT, GemmMetrics, facts)
