"""GEMM agent: dense, batched, grouped and quantized matrix multiplies, plus ops labelled `other`
whose kernels are GEMMs (re-labelled)."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

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


def _fp8_ratio(data: AgentData) -> float | None:
    bf16 = data.platform_peaks.get("matrix_bf16")
    fp8 = data.platform_peaks.get("matrix_fp8")
    return fp8 / bf16 if bf16 and fp8 else None


def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    misaligned = {op.name + " " + _shape_phrase(op): misaligned_dims(op) for op in group.members if misaligned_dims(op)}
    align_text = ""
    if misaligned:
        first, dims = next(iter(misaligned.items()))
        align_text = (
            f" {len(misaligned)} of the {len(group.members)} shapes have a dimension that is not a multiple of "
            f"{settings.GEMM_ALIGNMENT} (e.g. {', '.join(dims)} in {first})."
        )
    if group.estimate_method == "heuristic":
        kernel = dominant.kernels[0].name if dominant.kernels else dominant.name
        return Advice(
            insight=f"The trace gives no GEMM shapes for it (dominant kernel `{compute.clip(kernel, 80)}`).{align_text}",
            action=(
                f"Get the shapes first: {compute.attribution_hint(data.ctx)}. Then tune these GEMMs with the vendor GEMM "
                "library's offline tuning for the deployed shapes, or try another GEMM backend."
            ),
            reasoning=(
                "Without M, N and K there is no FLOP count, so the distance to the roofline is unknown; graph-replayed "
                "or custom GEMMs are typically launched with fixed, untuned shapes."
            ),
            resolution=(
                "Shape-specific tuning picks tile sizes and split strategies that fit the actual M, N, K instead of the "
                "library's generic heuristics."
            ),
        )
    ratio = _fp8_ratio(data)
    quantized = dominant.kind == "quantized"
    if group.bound == "compute":
        near = (group.weighted_efficiency or 0.0) >= dominant.attainable_percent - settings.NEAR_ATTAINABLE_MARGIN_PERCENT
        precision = ""
        if (not quantized and ratio and (dominant.compute_spec or "").endswith(("bf16", "fp16"))
                and dominant.mean_us >= settings.FP8_MIN_KERNEL_US):
            precision = (
                f" If the model tolerates it, FP8 GEMMs raise the compute ceiling {ratio:.1f}x on {data.ctx.platform} "
                "(matrix_fp8 vs matrix_bf16 peak)."
            )
        return Advice(
            insight=(
                f"Arithmetic intensity is {compute.fmt(dominant.flops_per_byte, 0)} FLOP/byte for the dominant shape "
                f"({_shape_phrase(dominant)}), so the GEMMs are limited by the matrix FLOP rate."
                + (f" They run at {compute.efficiency_phrase(group)}, {'close to' if near else 'well below'} the "
                   f"{dominant.attainable_percent:g} % of roofline large GEMMs attain on this GPU.")
                + align_text
            ),
            action=(
                ("Tune these exact shapes with the vendor GEMM library's offline tuning, or try a different GEMM backend"
                 if not near else "Remaining gains need shape-specific tuning in the vendor GEMM library (or another backend)")
                + (f"; pad M, N, K to multiples of {settings.GEMM_ALIGNMENT}/128 where you control them (hidden size, vocabulary, batch x tokens)."
                   if misaligned else ".")
                + precision
            ),
            reasoning=(
                f"Compute-bound GEMMs (FLOP/byte above {settings.TILE_TUNING_MIN_FLOPS_PER_BYTE:.0f} is typical) are set by tile "
                "shape and occupancy: a tile that does not divide the problem leaves partial tiles and idle compute units."
            ),
            resolution=(
                "Shape-specific tuning selects the tile and split strategy with the best utilisation for each (M, N, K); "
                "aligned dimensions avoid partial tiles and let the kernel use vectorised loads."
            ),
        )
    small = [op for op in group.members if (d := mnk(op)) and min(d[0], d[1]) <= settings.TINY_GEMM_DIM_MAX]
    # the tiny-M explanation only when those shapes hold most ("most": RELABEL_MIN_KERNEL_SHARE) of its time
    if small and sum(op.time_ms for op in small) > settings.RELABEL_MIN_KERNEL_SHARE * group.time_ms:
        small.sort(key=lambda op: -op.time_ms)
        many = sum(op.count for op in small) >= settings.TINY_GEMM_MIN_CALLS
        return Advice(
            insight=(
                f"{len(small)} of these GEMMs have M or N of at most {settings.TINY_GEMM_DIM_MAX} (e.g. {_shape_phrase(small[0])}): "
                "they are matrix-vector-like and read the whole weight matrix for a few rows."
            ),
            action=(
                "Batch more requests or tokens into each GEMM so M grows"
                + (" or merge the many small calls into one batched / grouped GEMM" if many else "")
                + ", and fuse the surrounding elementwise work into the GEMM epilogue."
            ),
            reasoning="With a tiny M the weights dominate the bytes moved, so time is set by HBM bandwidth, not FLOPs.",
            resolution="A larger M reuses each weight byte for more rows, raising FLOP/byte and moving the GEMM towards compute-bound.",
        )
    epilogue = (dominant.flops_per_byte or 0.0) < settings.EPILOGUE_FUSION_MAX_FLOPS_PER_BYTE
    small_calls = dominant.mean_us < settings.SMALL_GEMM_CALL_US
    return Advice(
        insight=(
            f"Arithmetic intensity is {compute.fmt(dominant.flops_per_byte, 1)} FLOP/byte for the dominant shape "
            f"({_shape_phrase(dominant)}): the GEMMs are memory-bound.{align_text}"
            + (f" Each call runs {dominant.mean_us:.1f} us: too little work to fill the GPU, so launch and tail effects "
               "set its time and the saving is small; more tokens per call is the lever, not kernel tuning."
               if small_calls else "")
        ),
        action=(
            "Fuse bias / activation / residual elementwise ops into the GEMM epilogue, and batch calls to raise M."
            if epilogue else
            "Check the operand layouts (transposed or strided inputs force extra passes) and batch calls to raise arithmetic intensity."
        ),
        reasoning=(
            (f"Below the ridge point of this GPU ({_ridge(dominant):.0f} FLOP/byte: its {dominant.compute_spec} peak over "
             "its HBM bandwidth) a GEMM is limited by memory traffic"
             if _ridge(dominant) else "This GEMM is limited by memory traffic")
            + "; every separate epilogue op re-reads and re-writes the output."
        ),
        resolution="An epilogue fusion writes the output once; larger batches reuse the weights across more rows.",
    )


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
