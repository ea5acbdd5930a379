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
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext, TracePhases
from tracelake.analyzers.finding_text import render_advice
from tracelake.analyzers.fusion_estimates import fused_attention_us

AGENT_NAME = "sdpa"
TIER = "compute"
DISPLAY_NAME = "Attention (SDPA)"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
FLASH_MARKERS = ("flash", "fmha", "flashattn", "attn_fwd", "attn_bwd")  # TraceLens sdpa_analysis flash detector (+ kernel names)
PAGED_MARKERS = ("unified_attention", "paged_attention", "vllm", "paged")  # TraceLens sdpa_analysis paged detector
MATH_MARKERS = ("_math", "math_")  # aten::_scaled_dot_product_attention_math: the unfused fallback
EFFICIENT_MARKERS = ("efficient_attention", "mem_efficient")
CUDNN_MARKERS = ("cudnn_attention",)
SAGE_MARKERS = ("sageattention", "sage_fwd")  # SageAttention: quantized (int8 QK) flash-style attention
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
    if compute.name_matches(name, SAGE_MARKERS) or any(m in kernels for m in SAGE_MARKERS):
        return "sage"
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


def _decode_tokens_per_sequence(phases: TracePhases) -> float | None:
    """Decode query tokens per request of the decode steps (phases mart), when the op's shapes do
    not show them (paged attention takes the queries of every request in one flat tensor)."""
    per_request = [s.decode_tokens / s.batch_size for s in phases.steps
                   if s.phase == "decode" and s.decode_tokens and s.batch_size]
    return max(per_request) if per_request else None


def _advice(fact: str, **values: object) -> AdviceText:
    return AdviceText(agent=AGENT_NAME, fact=fact, values=values)


def _is_decode(n_q: int | None, phases: TracePhases) -> bool:
    """Decode attention: a short query, unless the serving steps' phase (phases mart) says otherwise
    (decode advice only in a decode phase)."""
    decode = n_q is not None and n_q <= settings.DECODE_MAX_QUERY_LEN
    if phases.is_serving:
        phase = phases.single_phase
        return phase == "decode" or (phase is None and decode and "decode" in phases.phase_names)
    return decode


def _unmodelled_advice(group: OpGroup, data: AgentData, n_q: int | None, decode: bool) -> AdviceText:
    """Paged or unmodelled attention: decode advice, or get-the-shapes advice when the phase is unknown."""
    kv = _kv_cache_percent(group.members)
    kv_values = {"kv_cache_percent": kv, "tune_kv_block": kv is not None and kv > settings.KV_CACHE_WRITE_PERCENT_MAX}
    if decode:
        per_sequence = n_q if n_q is not None else _decode_tokens_per_sequence(data.ctx.phases)
        return _advice("decode_unmodelled", tokens_per_sequence=per_sequence, **kv_values)
    return _advice("phase_unknown", kind=group.dominant.kind, attribution_hint=compute.attribution_hint(data.ctx),
                   **kv_values)


def _fused_advice(group: OpGroup, n_q: int | None, n_kv: int | None, decode: bool, vendor: str | None) -> AdviceText:
    """Fused attention with shapes: against the sequence-length band, by bound and phase."""
    dominant = group.dominant
    n = max(n_q or 0, n_kv or 0)
    values: dict[str, object] = {
        "kind": dominant.kind, "seq_len": n, "n_q": n_q, "n_kv": n_kv, "within_band": False,
        "gqa_ratio": gqa_ratio(dominant), "backward": dominant.op_category == "SDPA_bwd",
        "short_sequences": 0 < n <= settings.SHORT_ATTENTION_SEQ_LEN, "vendor": vendor,
    }
    if n:
        anchor, low, high = expected_attention_band(n, head_dim(dominant))
        efficiency = group.weighted_efficiency or 0.0
        values.update(band_anchor=anchor, band_low=low, band_high=high, efficiency=efficiency,
                      within_band=efficiency >= low)
    if group.bound == "compute":
        return _advice("fused_compute_bound", mask_tensor=_mask_tensor(group), **values)
    return _advice("fused_decode" if decode else "fused_memory_bound", **values)


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which attention advice applies to the group (a row of analyzers/advice/sdpa.toml), with its values."""
    dominant = group.dominant
    if group.family == "eager":
        return _advice("eager")
    if dominant.kind == "math":
        return _advice("math_path")
    n_q, n_kv = seq_lens(dominant)
    phases = data.ctx.phases
    decode = _is_decode(n_q, phases)
    phase = phases.single_phase if phases.is_serving else None
    unmodelled = group.estimate_method == "heuristic"
    if phase == "prefill" and (unmodelled or dominant.kind == "paged"):
        tokens = [s.prefill_tokens for s in phases.steps if s.phase == "prefill" and s.prefill_tokens]
        return _advice("prefill", prompt_tokens=max(tokens) if tokens else None)
    # a paged op with a perf model but no query length (its roofline comes from the step annotations)
    # gets the fused-attention advice: "no perf model covers it" would contradict its printed roofline
    if unmodelled or (dominant.kind == "paged" and decode):
        return _unmodelled_advice(group, data, n_q, decode)
    return _fused_advice(group, n_q, n_kv, decode, data.ctx.vendor)


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def _mask_tensor(group: OpGroup) -> bool:
    """Some member passes an explicit mask / bias tensor (Input Dims slot 3 of the SDPA signatures
    is attn_mask / attn_bias; the flash signature has a scalar there; paged ops take their output there)."""
    for op in group.members:
        if op.kind == "paged":
            continue
        dims = op.dims()
        if len(dims) > 3 and isinstance(dims[3], list) and len(dims[3]) > 0:
            return True
    return False


def _scores_shape(op: OpRecord) -> tuple[int, int]:
    """(max(Sq, Skv), head dim D) of the scores' batched matmul [.., Sq, D] x [.., D, Skv]."""
    shapes = [d for d in op.dims() if isinstance(d, list) and len(d) >= 3]
    if "baddbmm" in op.name:
        shapes = shapes[1:]
    if len(shapes) < 2:
        return 0, 0
    return max(int(shapes[0][-2]), int(shapes[1][-1])), int(shapes[0][-1])


def _fused_attention_impact(gemms: list[OpRecord], roles: dict[str, str], total_ms: float,
                            e2e_ms: float) -> tuple[compute.Impact, str] | None:
    """The kernel-fusion agent's method for unfused attention (one method on every vendor): one fused
    kernel takes the batched matmuls' FLOPs at the band fused attention reaches at this sequence
    length and head dim; the saving is the eager chain's time minus that. None without FLOPs."""
    scores = [op for op in gemms if roles.get(op.signature_key, "").startswith("scores")]
    if not scores or total_ms <= 0 or any(not op.gflops or not op.peak_tflops for op in gemms):
        return None
    seq_len, dim = _scores_shape(scores[0])
    if not seq_len:
        return None
    _, low, high = expected_attention_band(seq_len, dim)
    flops = sum((op.gflops or 0.0) * 1e9 * op.count for op in gemms)
    peak = max(op.peak_tflops or 0.0 for op in gemms)
    fused_ms = [fused_attention_us(flops, peak, e) / 1000.0 for e in (low, (low + high) / 2.0, high)]
    saved = [100.0 * max(0.0, total_ms - f) / e2e_ms for f in fused_ms]
    model = (f"one fused attention kernel would take about {fused_ms[2]:.3f}-{fused_ms[0]:.3f} ms: "
             f"{flops / 1e12:.2f} TFLOP of attention (the batched matmuls) at {low:.0f}-{high:.0f} % of the "
             f"{peak:g} TFLOPS {gemms[0].compute_spec or ''} peak, the band fused attention reaches at N = {seq_len} "
             f"and head dim {dim}")
    return compute.Impact(method="quantified", low=saved[0], mid=saved[1], high=saved[2]), model


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
    modelled = _fused_attention_impact(gemms, roles, total_ms, ctx.e2e_time_ms)
    impact = modelled[0] if modelled else compute.heuristic_impact(total_ms / ctx.e2e_time_ms * 100.0)
    members.sort(key=lambda op: -op.time_ms)
    for op in members:
        op.impact = None
    dominant = members[0]
    bound = (dominant.bound or "unknown") if impact.method == "quantified" else "unmodeled"
    return [OpGroup(
        bound=bound, library=dominant.library, bucket="unknown", family="eager",
        estimate_method=impact.method, members=members, impact=impact, chain=True,
        chain_model=modelled[1] if modelled else None,
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
        flash_count=sum(1 for op in ops if op.kind in ("flash", "sage")),
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


FUSED_KINDS = ("flash", "efficient", "cudnn", "sage")


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
