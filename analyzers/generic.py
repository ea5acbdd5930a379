"""Generic agent: every op category no other compute agent owns (`other`, `multi_tensor_apply`,
`record_param_comms`, RoPE, cross-entropy, SSM, custom ops, ...), minus the `other` ops that were
re-labelled to the agent of their kernels (agent_categories seed). Communication and host-sync ops are left to the system agents."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

AGENT_NAME = "generic"
TIER = "compute"
DISPLAY_NAME = "Other ops"
# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
KIND_RULES = (  # first match on the lower-cased op name (TraceLens generic-op spec keyword table, extended)
    ("optimizer", ("_foreach_", "multi_tensor", "fused_adam", "fused_sgd")),
    ("rope", ("rotary", "rope")),  # before "embedding": rotary_embedding is a RoPE, not a lookup
    ("embedding", ("embedding",)),
    ("index", ("index_select", "index", "gather", "scatter", "take", "masked_select", "nonzero")),
    ("concat", ("cat", "stack", "split", "chunk", "narrow", "pad")),
    ("pooling", ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool")),
    ("sort", ("sort", "topk", "argsort", "unique")),
    ("loss", ("cross_entropy", "nll_loss", "mse_loss")),
    ("creation", ("arange", "linspace", "full", "empty", "randperm", "rand", "normal")),
    ("quantize", ("quant",)),
)
HOST_SYNC_OPS = ("_local_scalar_dense", "item", "nonzero")  # ops whose kernels are device-to-host copies
MISCATEGORIZED_ACTIONS = {  # the owning agent's main action, in one clause
    "GEMM": "tune its GEMM shapes through the vendor GEMM library or another GEMM backend",
    "SDPA": "make sure a fused attention kernel is selected and batch more queries per call",
    "NORM": "use a fused normalization kernel that also applies the residual add",
    "CONV": "use channels-last tensors and convolution autotuning",
    "MoE": "tune the fused MoE kernel's tile configuration for this expert count and batch more tokens per expert",
    "triton": "review the compiler's fusion boundaries and autotuning for this kernel",
    "reduce": "reduce over the contiguous dimension and fuse the reduction with its producer",
}


class GenericFacts(BaseModel):
    kind_counts: dict[str, int]
    kind_time_ms: dict[str, float]
    categories: dict[str, int]  # op_category -> signatures
    graph_replay_count: int  # synthetic ops from GPU graph replays (no shapes)
    communication_ops_skipped: list[str]
    host_sync_ops_skipped: list[str]
    miscategorized: dict[str, str]  # op name -> kernel category the taxonomy sees
    relabelled_away_count: int  # `other` ops re-labelled to another agent (not analyzed here)


class GenericMetrics(ComputeMetrics):
    category_specific: GenericFacts


dominant_kernel_category = compute.dominant_kernel_category


def is_communication(op: OpRecord) -> bool:
    dominant = dominant_kernel_category(op)
    return compute.name_matches(op.name, compute.COMMUNICATION_KEYWORDS) or (dominant is not None and dominant[0] == "comm" and dominant[1] > 0.5)


def is_host_sync(op: OpRecord) -> bool:
    dominant = dominant_kernel_category(op)
    return compute.base_op_name(op.name) in HOST_SYNC_OPS or (dominant is not None and dominant[0] == "memcpy" and dominant[1] > 0.5)


def miscategorized_as(op: OpRecord) -> str | None:
    dominant = dominant_kernel_category(op)
    if dominant and op.dominant_kernel_agent and dominant[1] > settings.MISCATEGORIZED_MIN_SHARE:
        return dominant[0]
    return None


def classify(op: OpRecord) -> str:
    if is_communication(op):
        return "communication"
    if op.op_category == "multi_tensor_apply":
        return "optimizer"
    if op.name.endswith(compute.SYNTHETIC_SUFFIX):
        return "launched_outside_op"
    base = op.name.lower().split("::")[-1]
    for kind, markers in KIND_RULES:
        if any(m in base for m in markers):
            return kind
    if miscategorized_as(op):
        return "miscategorized"
    return "miscellaneous"


def exclude(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, ops: list[OpRecord]) -> dict[str, str]:
    eager = compute.eager_attention_ops(db, ctx)
    reasons = {}
    for op in ops:
        if op.kind == "communication":
            reasons[op.signature_key] = "collective communication: left to the multi-kernel (communication) analysis"
        elif is_host_sync(op):
            reasons[op.signature_key] = "device-to-host copy / host sync: left to the multi-kernel and CPU-idle analyses"
        elif op.signature_key in eager:
            reasons[op.signature_key] = compute.EAGER_ATTENTION_NOTE
    return reasons


def _misc_text(group: OpGroup) -> str:
    seen = {op.name: miscategorized_as(op) for op in group.members if miscategorized_as(op)}
    if not seen:
        return ""
    name, category = next(iter(seen.items()))
    owner = next(op.dominant_kernel_agent for op in group.members if op.name == name)
    return (
        f" Possible miscategorization: the kernel taxonomy classifies most of the kernel time of `{compute.clip(name, 80)}` as "
        f"{category} kernels, which the {owner} agent would analyze; it stays here because {category} kernels do "
        "not re-label `other` ops (seeds/agent_categories.csv takes_other_ops)."
    )


def advise(group: OpGroup, data: AgentData) -> Advice:
    dominant = group.dominant
    kind = dominant.kind
    module = compute.module_hint(group)
    where = f" in `{module}`" if module else ""
    misc = _misc_text(group)
    base = compute.generic_advice(group, f"`{compute.clip(dominant.name, 80)}`")
    if kind == "optimizer":
        return Advice(
            insight=f"Optimizer update kernels (multi-tensor apply).{misc}",
            action="Use the fused optimizer implementation (fused=True, or a fused multi-tensor optimizer) so the whole update runs in a few kernels.",
            reasoning="A foreach optimizer still launches one kernel per step of the update rule over all parameters.",
            resolution="A fused optimizer reads each parameter, gradient and state once per step.",
        )
    if kind in ("index", "embedding"):
        return Advice(
            insight=f"Embedding / index lookups{where}: memory-bound gathers that should run near HBM bandwidth.{misc}",
            action="Sort or deduplicate indices where possible, keep the table contiguous, and fuse the lookup with the following op (e.g. embedding + positional add).",
            reasoning="Gathers read scattered rows; small rows and random indices waste most of each memory transaction.",
            resolution="Sorted, contiguous access reads whole cache lines; fusion removes the write and re-read of the gathered rows.",
        )
    if kind == "concat":
        rope = data.ctx.facts.has_rotary and any(
            compute.name_matches(m, ("attention", "attn", "rotary")) for op in group.members for m in op.module_chain)
        return Advice(
            insight=f"Concatenations{where} copy their inputs into a new tensor.{misc}"
            + (" Inside attention of a model with a rotary embedding this is usually its rotate-half step or a "
               "KV-cache append." if rope else ""),
            action=(
                "Use a fused rotary-embedding kernel" + compute.unless_compiled(data.ctx, " (or compile the attention block)")
                + " instead of slicing and concatenating halves; append to a pre-allocated KV cache in place."
                if rope else
                "Pre-allocate the output and let producers write into slices of it"
                + compute.unless_compiled(data.ctx, " (or compile the region)") + " instead of concatenating afterwards."
            ),
            reasoning="Every concatenation reads and writes its whole output once more, purely to move data.",
            resolution="Writing results in place (or fusing the producer) removes the extra copy.",
        )
    if kind == "rope":
        return Advice(
            insight=f"Rotary position embedding{where}.{misc}",
            action="Use a fused rotary-embedding kernel applied to Q and K together (or fuse it into the attention / QKV projection).",
            reasoning="Rotary embedding is pointwise on Q and K; as a separate op it costs a full read and write of both.",
            resolution="Fusing it into a neighbour removes that pass over Q and K.",
        )
    if kind == "pooling":
        return Advice(
            insight=f"Pooling{where}.{misc}",
            action="Run pooling in channels-last format together with the convolutions, and fuse it with the preceding activation where the library allows.",
            reasoning="Pooling is memory-bound; channels-first tensors force strided window reads.",
            resolution="Channels-last makes the window reads contiguous; fusion removes an intermediate tensor.",
        )
    if kind == "launched_outside_op":
        kernel = dominant.kernels[0].name if dominant.kernels else dominant.name
        return Advice(
            insight=(
                f"Kernels launched outside any profiled op (GPU graph replay or driver launches), e.g. `{compute.clip(kernel, 80)}`; "
                f"the trace has no shapes for them.{misc}"
            ),
            action=(
                f"To get shapes, {compute.attribution_hint(data.ctx)} so these kernels are attributed to ops, then analyze "
                "them in their real category."
            ),
            reasoning="Without the launching op there is neither a shape nor a perf model, only the kernel time.",
            resolution="Attributed kernels get perf models and category-specific advice.",
        )
    if misc:
        category = next(c for op in group.members if (c := miscategorized_as(op)))
        return Advice(
            insight=misc.strip(),
            action=f"Treat it as a {category} op: {MISCATEGORIZED_ACTIONS[category]}.",
            reasoning=base.reasoning,
            resolution=base.resolution,
        )
    return Advice(insight=f"Op category `{dominant.op_category}`{where}.", action=base.action, reasoning=base.reasoning, resolution=base.resolution)


def facts(data: AgentData) -> GenericFacts:
    ops = data.ops
    counts, times = compute.kind_totals(ops)
    categories: dict[str, int] = {}
    for op in ops:
        categories[op.op_category] = categories.get(op.op_category, 0) + 1
    return GenericFacts(
        kind_counts=counts,
        kind_time_ms=times,
        categories=categories,
        graph_replay_count=sum(1 for op in ops if op.name.endswith(compute.SYNTHETIC_SUFFIX) and "graphlaunch" in op.name.lower()),
        communication_ops_skipped=sorted({op.name for op in ops if op.kind == "communication"}),
        host_sync_ops_skipped=sorted({op.name for op in ops if op.kind != "communication" and is_host_sync(op)}),
        miscategorized={op.name: cat for op in ops if (cat := miscategorized_as(op))},
        relabelled_away_count=len(data.handed_off),
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="uncategorized", classify=classify, advise=advise,
    exclude=exclude, owns_the_rest=True,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Findings for every op no category agent owns: mostly heuristic (no perf model), with
    miscategorization, layout and launch notes; communication and host syncs are skipped."""
    return compute.run_agent(db, ctx, AGENT, GenericMetrics, facts)
