"""Attention agent: fused scaled-dot-product attention (forward / backward), inference
(paged / decode) attention, ops labelled `other` whose kernels are attention kernels
(re-labelled), and eager attention (batched matmul, softmax, batched matmul) found anywhere in
the trace."""

from __future__ import annotations

import re

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.common import expected_attention_band
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

AGENT_NAME = "sdpa"
TIER = "compute"
DISPLAY_NAME = "Attention (SDPA)"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
FLASH_MARKERS = ("flash", "fmha", "flashattn", "attn_fwd", "attn_bwd")  # TraceLens sdpa_analysis flash detector (+ kernel names)
PAGED_MARKERS = ("unified_attention", "paged_attention", "vllm", "paged")  # TraceLens sdpa_analysis paged detector
MATH_MARKERS = ("_math", "math_")  # aten::_scaled_dot_product_attention_math: the unfused fallback
EFFICIENT_MARKERS = ("efficient_attention", "mem_efficient")
CUDNN_MARKERS = ("cudnn_attention",)
KV_CACHE_KERNEL_PATTERN = re.compile(r"reshape_and_cache|store_kvcache|kv_cache", re.IGNORECASE)


class SdpaFacts(BaseModel):
    flash_count: int
    paged_count: int
    efficient_count: int
    math_count: int  # unfused (math / eager-fallback) SDPA signatures
    other_count: int
    has_perf_model_count: int
    relabelled_count: int
    eager_attention_detected: bool
    eager_attention_ops: list[str]
    forward_time_ms: float
    backward_time_ms: float
    max_query_len: int | None
    max_kv_len: int | None
    gqa_ratio: int | None  # H_Q / H_KV of the largest op, > 1 for grouped-query attention
    kv_cache_write_percent: float | None  # KV-cache write kernels as % of the attention ops' kernel time


class SdpaMetrics(ComputeMetrics):
    category_specific: SdpaFacts


def _kernel_text(op: OpRecord) -> str:
    return " ".join(k.name for k in op.kernels).lower()


def classify(op: OpRecord) -> str:
    name = op.name.lower()
    kernels = _kernel_text(op)
    if compute.name_matches(name, PAGED_MARKERS) or "paged_attention" in kernels or "unified_attention" in kernels:
        return "paged"
    if compute.name_matches(name, MATH_MARKERS) or op.kernel_category_shares.get("GEMM", 0.0) > 0.5:
        return "math"
    if compute.name_matches(name, FLASH_MARKERS) or any(m in kernels for m in FLASH_MARKERS):
        return "flash"
    if compute.name_matches(name, EFFICIENT_MARKERS):
        return "efficient"
    if compute.name_matches(name, CUDNN_MARKERS):
        return "cudnn"
    return "other"


def seq_lens(op: OpRecord) -> tuple[int | None, int | None]:
    params = op.perf_params or {}
    try:
        return int(params["N_Q"]), int(params["N_KV"])
    except (KeyError, TypeError, ValueError):
        return None, None


def head_dim(op: OpRecord) -> int | None:
    try:
        return int((op.perf_params or {})["d_h_qk"])
    except (KeyError, TypeError, ValueError):
        return None


def gqa_ratio(op: OpRecord) -> int | None:
    params = op.perf_params or {}
    try:
        h_q, h_kv = int(params["H_Q"]), int(params["H_KV"])
    except (KeyError, TypeError, ValueError):
        return None
    return h_q // h_kv if h_kv else None


def _kv_cache_percent(ops: list[OpRecord]) -> float | None:
    total = sum(k.time_us for op in ops for k in op.kernels)
    cache = sum(k.time_us for op in ops for k in op.kernels if KV_CACHE_KERNEL_PATTERN.search(k.name))
    return 100.0 * cache / total if total > 0 and cache > 0 else None


def _decode_tokens_per_sequence(phases) -> float | None:
    """Decode query tokens per request of the decode steps (phases mart), when the op's shapes do
    not show them (paged attention takes the queries of every request in one flat tensor)."""
    steps = [s for s in phases.steps if s.phase == "decode" and s.decode_tokens and s.batch_size]
    return max(s.decode_tokens / s.batch_size for s in steps) if steps else None


def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    kind = dominant.kind
    if group.family == "eager":
        return Advice(
            insight=(
                "The scores are computed with a batched matmul, normalised by a separate softmax and multiplied by V in "
                "a second batched matmul: eager attention materialises the full score matrix in memory."
            ),
            action=(
                "Replace the matmul-softmax-matmul chain with a fused scaled-dot-product attention call "
                "(torch.nn.functional.scaled_dot_product_attention, or the model's fused attention implementation)."
            ),
            reasoning=(
                "Eager attention writes and re-reads the Sq x Skv score and probability tensors and launches separate "
                "kernels for each step, so its time is dominated by memory traffic rather than the attention FLOPs."
            ),
            resolution=(
                "A fused attention kernel keeps the score tile on chip (online softmax), so only Q, K, V and the output "
                "touch HBM and the whole chain runs as one kernel."
            ),
        )
    if kind == "math":
        return Advice(
            insight="The attention runs on the unfused math path (separate GEMM and softmax kernels).",
            action=(
                "Make the fused attention backend eligible (supported dtype, head dim and mask; no unsupported flags) "
                "so scaled-dot-product attention dispatches to a flash / memory-efficient kernel."
            ),
            reasoning="The math path materialises the attention matrix and runs several kernels per call.",
            resolution="A fused kernel avoids the S x S intermediate and the extra launches.",
        )
    n_q, n_kv = seq_lens(dominant)
    decode = n_q is not None and n_q <= settings.DECODE_MAX_QUERY_LEN
    # the serving steps' phase (phases mart) overrules the shapes: decode advice only in a decode phase
    phases = data.ctx.phases
    phase = phases.single_phase if phases.is_serving else None
    if phases.is_serving:
        decode = phase == "decode" or (phase is None and decode and "decode" in phases.phase_names)
    if phase == "prefill" and (group.estimate_method == "heuristic" or kind == "paged"):
        tokens = [s.prefill_tokens for s in phases.steps if s.phase == "prefill" and s.prefill_tokens]
        token_text = f" over {max(tokens):,} prompt tokens per step" if tokens else ""
        return Advice(
            insight=f"Prefill attention{token_text} (the serving steps are prefill steps).",
            action=("Check that the engine selects its flash / varlen prefill attention kernel for this head "
                    "configuration, and use chunked prefill so long prompts share steps with other requests."),
            reasoning=("Prefill attention processes many query tokens per sequence, so it is compute-bound and its "
                       "cost grows with the prompt length squared."),
            resolution=("A tuned prefill kernel raises the FLOP rate; chunked prefill bounds the step time and keeps "
                        "other requests' steps flowing."),
        )
    if group.estimate_method == "heuristic" or (kind == "paged" and (decode or n_q is None)):
        kv = _kv_cache_percent(group.members)
        kv_text = ""
        if kv is not None:
            kv_text = f" KV-cache write kernels take {kv:.1f} % of these ops' kernel time."
        tune_block = kv is not None and kv > settings.KV_CACHE_WRITE_PERCENT_MAX
        block_text = "; the KV-cache write share is high, so tune the KV block size (16/32/64)" if tune_block else ""
        if decode:
            per_sequence = n_q if n_q is not None else _decode_tokens_per_sequence(data.ctx.phases)
            tokens_text = (f"{per_sequence:g} query token(s) per sequence" if per_sequence is not None
                           else "few query tokens per sequence")
            return Advice(
                insight=f"Decode attention: {tokens_text}.{kv_text}",
                action=("Batch more decode requests per step (larger decode batch) so each KV-cache read serves more "
                        f"queries{block_text}."),
                reasoning=("Decode attention reads the whole KV cache for one or a few query tokens, so it is bound by "
                           "KV-cache bandwidth; small decode batches leave the GPU underused."),
                resolution="A larger decode batch amortises each KV-cache read over more queries and fills more compute units.",
            )
        return Advice(
            insight=(f"Attention implementation: {kind}; no perf model covers it, so only its time share is known "
                     f"(the trace gives no query length, so the phase is unknown).{kv_text}"),
            action=(f"Get the shapes first: {compute.attribution_hint(data.ctx)}; then check that the fused attention "
                    f"kernel of the serving engine or library is selected for this head configuration{block_text}."),
            reasoning=("Without the query and key lengths there is no FLOP or byte count, so the distance to the roofline "
                       "is unknown."),
            resolution="With shapes, the attention gets a perf model and a measured distance to its roofline.",
        )
    n = max(n_q or 0, n_kv or 0)
    short = 0 < n <= settings.SHORT_ATTENTION_SEQ_LEN
    band_text, within = "", False
    if n:
        anchor, low, high = expected_attention_band(n, head_dim(dominant))
        eff = group.weighted_efficiency or 0.0
        within = eff >= low
        band_text = (
            f" Sequence length is {n} (query {n_q}, key/value {n_kv}); fused attention at this length (nearest anchor "
            f"N = {anchor}) and head dim typically reaches {low:.0f}-{high:.0f} % of roofline, and this group averages {eff:.1f} %"
            + (" (within or above that band)." if within else " (below that band).")
        )
    ratio = gqa_ratio(dominant)
    gqa = f" Grouped-query attention with {ratio} query heads per KV head." if ratio and ratio > 1 else ""
    backward = " Backward attention is naturally slower than forward (it recomputes the scores)." if dominant.op_category == "SDPA_bwd" else ""
    if group.bound == "compute":
        return Advice(
            insight=f"Fused ({kind}) attention, compute-bound.{band_text}{gqa}{backward}",
            action=(
                ("The kernel is within the band fused attention reaches here: a faster fused-attention backend for this "
                 "head dim (FlashAttention-3 / cuDNN on Hopper, CK / aiter on ROCm) is the remaining lever"
                 + ("; longer (packed) sequences per call raise the efficiency further." if short else "."))
                if within else
                "Try another fused attention backend or its tuned tile configuration for this head dim and sequence length"
                + (", and if the mask is causal pass `is_causal=True` instead of a dense mask tensor." if _mask_tensor(group)
                   else ".")
            ),
            reasoning=(
                "Fused attention efficiency grows with sequence length: short sequences give few tiles per head and a large "
                "share of softmax / masking work per FLOP." if short else
                f"At N = {n} every head has many tiles, so the gap to the band is the kernel's own efficiency for this "
                "head dim and dtype, not the problem size."
            ),
            resolution=(
                "Longer or packed sequences give the kernel more full tiles; a better-matched kernel configuration raises the "
                "FLOP rate for the same work." if short else
                "A backend tuned for this head dim and dtype raises the FLOP rate for the same work."
            ),
        )
    if decode:
        return Advice(
            insight=f"Fused ({kind}) attention, memory-bound, {n_q} query token(s) per sequence (decode).{band_text}{gqa}",
            action=("Batch more sequences per call, or use a decode-specific attention kernel for single-token queries; "
                    "do not copy Q, K, V to contiguous buffers before the call if the backend accepts strided inputs."),
            reasoning="With few query tokens per key the kernel streams K and V once and does little math per byte.",
            resolution="More queries per K/V read raise the arithmetic intensity; avoiding extra copies removes memory passes.",
        )
    return Advice(
        insight=f"Fused ({kind}) attention, memory-bound.{band_text}{gqa}{backward}",
        action=("Pack or batch more sequences per call so each kernel gets more full tiles; do not copy Q, K, V to "
                "contiguous buffers before the call if the backend accepts strided inputs."),
        reasoning=(f"At sequence length {n} each head has few tiles, so loading Q, K and V and the per-call setup dominate "
                   "the attention math." if n else
                   "Short attention calls are dominated by loading Q, K and V and by the per-call setup."),
        resolution="More sequences per call give the kernel more tiles to keep busy; avoiding extra copies removes memory passes.",
    )


def _mask_tensor(group: OpGroup) -> bool:
    """Some member passes an explicit mask / bias tensor (Input Dims slot 3 of the SDPA signatures
    is attn_mask / attn_bias; the flash signature has a scalar there)."""
    for op in group.members:
        dims = op.dims()
        if len(dims) > 3 and isinstance(dims[3], list) and len(dims[3]) > 0:
            return True
    return False


def eager_groups(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, data: AgentData) -> list[OpGroup]:
    """One P-item for the eager attention ops of the trace. Its efficiency is the GEMMs' roofline
    time over the whole chain's time: a fused kernel at roofline needs only the GEMM FLOPs."""
    all_ops = compute.load_op_rows(db, ctx, None)
    roles = compute.find_eager_attention(all_ops)
    members = [op for op in all_ops if op.signature_key in roles]
    data.extra["eager_attention_ops"] = [f"{op.name} ({roles[op.signature_key]})" for op in members]
    if not members or any(op.name in ctx.fusion_flagged_ops for op in members) or ctx.e2e_time_ms <= 0:
        return []
    for op in members:
        op.analyzed_as = AGENT_NAME
        op.kind = "eager"
    gemms = [op for op in members if op.op_category == "GEMM"]
    total_ms = sum(op.time_ms for op in members)
    if gemms and all(op.roofline_time_us is not None for op in gemms) and total_ms > 0:
        roofline_ms = sum((op.roofline_time_us or 0.0) * op.count for op in gemms) / 1000.0
        efficiency = min(100.0, 100.0 * roofline_ms / total_ms)
        impact = compute.quantified_impact(total_ms, ctx.e2e_time_ms, efficiency)
    else:
        impact = compute.heuristic_impact(total_ms / ctx.e2e_time_ms * 100.0)
    members.sort(key=lambda op: -op.time_ms)
    for op in members:
        op.impact = None
    dominant = members[0]
    bound = (dominant.bound or "unknown") if impact.method == "quantified" else "unmodeled"
    return [OpGroup(
        bound=bound, library=dominant.library, bucket="unknown", family="eager",
        estimate_method=impact.method, members=members, impact=impact, chain=True,
        title=f"Eager attention ({len(members)} ops, {dominant.label}): replace with fused attention",
    )]


def facts(data: AgentData) -> SdpaFacts:
    ops = [op for op in data.ops if op.kind != "eager"]
    largest = max(ops, key=lambda op: op.time_ms) if ops else None
    lens = [seq_lens(op) for op in ops]
    queries = [q for q, _ in lens if q]
    keys = [k for _, k in lens if k]
    eager = data.extra.get("eager_attention_ops", [])
    return SdpaFacts(
        flash_count=sum(1 for op in ops if op.kind == "flash"),
        paged_count=sum(1 for op in ops if op.kind == "paged"),
        efficient_count=sum(1 for op in ops if op.kind == "efficient"),
        math_count=sum(1 for op in ops if op.kind == "math"),
        other_count=sum(1 for op in ops if op.kind in ("other", "cudnn")),
        has_perf_model_count=sum(1 for op in ops if op.has_perf_model),
        relabelled_count=sum(1 for op in ops if op.relabelled_from),
        eager_attention_detected=bool(eager),
        eager_attention_ops=eager,
        forward_time_ms=sum(op.time_ms for op in ops if op.op_category != "SDPA_bwd"),
        backward_time_ms=sum(op.time_ms for op in ops if op.op_category == "SDPA_bwd"),
        max_query_len=max(queries) if queries else None,
        max_kv_len=max(keys) if keys else None,
        gqa_ratio=gqa_ratio(largest) if largest else None,
        kv_cache_write_percent=_kv_cache_percent(ops),
    )


FUSED_KINDS = ("flash", "efficient", "cudnn")


def attainable(op: OpRecord) -> float:
    """Fused attention attains the top of its sequence-length band (TraceLens sdpa spec); other
    attention the default share."""
    n_q, n_kv = seq_lens(op)
    n = max(n_q or 0, n_kv or 0)
    if op.kind in FUSED_KINDS and n:
        return expected_attention_band(n, head_dim(op))[2]
    return settings.ATTAINABLE_ROOFLINE_PERCENT


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="attention",
    classify=classify, advise=advise, extra_groups=eager_groups, attainable=attainable,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Attention findings: fused-attention efficiency against the sequence-length band, decode
    attention, unfused / eager attention to replace with a fused kernel."""
    return compute.run_agent(db, ctx, AGENT, SdpaMetrics, facts)
