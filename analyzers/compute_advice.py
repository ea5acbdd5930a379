"""Advice and pattern rules several compute agents share: the bound-type fallback wording, hints
that depend on the trace's quality checks or modules, eager attention (bmm -> softmax -> bmm over
one score tensor) and the memory layout of a convolution's input."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import duckdb

from tracelake.analyzers.compute_ops import load_op_rows
from tracelake.analyzers.compute_records import Advice, OpGroup, OpRecord
from tracelake.analyzers.compute_text import base_op_name, is_shape, parse_json_list
from tracelake.analyzers.contracts import AnalysisContext

SOFTMAX_PATTERN = re.compile(r"softmax", re.IGNORECASE)
EAGER_ATTENTION_GEMMS = ("bmm", "baddbmm", "matmul")  # the batched matmuls of eager attention
EAGER_ATTENTION_NOTE = "part of an eager attention pattern (batched matmul, softmax, batched matmul); the sdpa agent analyzes it"


def unless_compiled(ctx: AnalysisContext, clause: str) -> str:
    """`clause` (advice to compile) unless the trace is already compiled (workload_facts)."""
    return "" if ctx.facts.is_compiled else clause


def generic_advice(group: OpGroup, what: str) -> Advice:
    """Bound-type fallback wording (TraceLens Action Prose Guidance rows (a), (b), heuristic)."""
    if group.estimate_method == "heuristic":
        return Advice(
            insight="",
            action=(
                f"Check whether a library or fused implementation exists for {what}; if not, profile its kernels "
                "(hardware counters) before tuning, since the trace cannot say how far it is from its roofline."
            ),
            reasoning="Without a perf model there is no FLOP or byte count, so the trace shows only the time share.",
            resolution=("A faster implementation shortens the op directly; the estimate assumes 15-45 % of its time "
                        "is recoverable."),
        )
    if group.bound == "compute":
        return Advice(
            insight="",
            action=f"Profile the dominant kernels of {what} for tile size and occupancy, or try another backend.",
            reasoning="The op is compute-bound and achieves only part of the platform's peak FLOP rate.",
            resolution="A better-tuned kernel raises the achieved FLOP rate towards the peak for the same work.",
        )
    return Advice(
        insight="",
        action=f"Improve memory access for {what}: contiguous inputs, vectorized loads, and fusion with neighbouring ops.",
        reasoning="The op is memory-bound and moves its bytes at only part of the HBM bandwidth.",
        resolution="Fewer passes over memory or wider accesses move the same bytes in less time.",
    )


def attribution_hint(ctx: AnalysisContext) -> str:
    """How to get shapes for kernels the trace does not attribute to an op, given its quality checks."""
    if ctx.quality_verdicts.get("cpu_ops_present") in ("warn", "fail"):
        return "profile with CPU activity and shape recording enabled (the trace has no CPU ops)"
    if ctx.quality_verdicts.get("graph_replay") in ("warn", "fail"):
        return "pass the GPU graph capture traces (or profile one eager iteration)"
    return "profile with shape recording enabled"


def module_hint(group: OpGroup) -> str:
    """The innermost two nn.Module classes of the group's first op that ran inside one ("" when none
    did: `root` is the placeholder of ops outside every module)."""
    modules = next((chain for op in group.members if (chain := [m for m in op.module_chain if m != "root"])), [])
    return " > ".join(modules[-2:]) if modules else ""


def _tensor_shapes(op: OpRecord) -> list[list[int]]:
    return [d for d in op.dims() if is_shape(d) and d]


def _product(values: Sequence[int]) -> int:
    result = 1
    for v in values:
        result *= v
    return result


def find_eager_attention(ops: Sequence[OpRecord]) -> dict[str, str]:
    """Ops that form eager attention, signature_key -> role: a softmax over a (..., Sq, Skv) score
    tensor plus the batched matmuls that produce it (Q @ K^T) or consume it (P @ V)."""
    scores: dict[tuple[int, int, int], list[OpRecord]] = defaultdict(list)
    for op in ops:
        if op.op_category.startswith("SDPA") or op.op_category == "InferenceAttention" or not SOFTMAX_PATTERN.search(op.name):
            continue
        shapes = _tensor_shapes(op)
        if shapes and len(shapes[0]) >= 3:
            s = shapes[0]
            scores[(_product(s[:-2]), s[-2], s[-1])].append(op)
    if not scores:
        return {}
    found: dict[str, str] = {}
    matched: set[tuple[int, int, int]] = set()
    for op in ops:
        if op.op_category != "GEMM" or base_op_name(op.name) not in EAGER_ATTENTION_GEMMS:
            continue
        shapes = _tensor_shapes(op)[1:] if "baddbmm" in op.name else _tensor_shapes(op)
        if len(shapes) < 2 or len(shapes[0]) < 3 or len(shapes[1]) < 3 or shapes[0][-1] != shapes[1][-2]:
            continue
        a, b = shapes[0], shapes[1]
        lead = _product(a[:-2])
        if (lead, a[-2], b[-1]) in scores:
            found[op.signature_key] = "scores = Q x K^T"
            matched.add((lead, a[-2], b[-1]))
        elif (lead, a[-2], a[-1]) in scores:
            found[op.signature_key] = "output = P x V"
            matched.add((lead, a[-2], a[-1]))
    for key in matched:
        for op in scores[key]:
            found[op.signature_key] = "softmax over the scores"
    return found if matched else {}


def eager_attention_ops(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> dict[str, str]:
    """find_eager_attention over every op of the trace (no kernel lookup needed)."""
    return find_eager_attention(load_op_rows(db, ctx, None))


def tensor_layout(op: OpRecord) -> str | None:
    """channels_last / channels_first for a 4-D first input, from its strides; None otherwise."""
    strides = parse_json_list(op.input_strides)
    dims = parse_json_list(op.input_dims)
    if not strides or not dims or not isinstance(dims[0], list) or len(dims[0]) != 4:
        return None
    first = strides[0]
    if not isinstance(first, list) or len(first) != 4:
        return None
    return "channels_last" if first[1] == 1 and dims[0][1] > 1 else "channels_first"


def latency_values(group: OpGroup) -> dict[str, object]:
    """The values of the latency-floor clause (analyzers/advice/latency.toml): whether the group is
    latency-bound (compute_impact groups such ops apart), its dominant op's time per call and the
    time its work would take at the roofline."""
    dominant = group.dominant
    return {"latency_bound": group.bound == "latency", "mean_us": dominant.mean_us,
            "ideal_us": dominant.roofline_time_us or 0.0}


def takes_q_and_k(op: OpRecord) -> bool:
    """A rotary op whose inputs hold both Q and K: at least two tensors of two or more dimensions
    with the same leading (token) dimension, as vLLM / SGLang `rotary_embedding(positions, query,
    key, ...)` and FlashInfer's `apply_rope*(q, k, ...)` take them."""
    leading = [shape[0] for shape in _tensor_shapes(op) if len(shape) >= 2]
    return any(leading.count(first) >= 2 for first in set(leading))
