"""Generic agent: every op category no other compute agent owns (`other`, `multi_tensor_apply`,
`record_param_comms`, RoPE, cross-entropy, SSM, custom ops, ...), minus the `other` ops that were
re-labelled to the agent of their kernels (agent_categories seed). Communication and host-sync ops
are left to the system agents."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice
from tracelake.core.text_format import clip

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
    return (compute.name_matches(op.name, compute.COMMUNICATION_KEYWORDS)
            or (dominant is not None and dominant[0] == "comm" and dominant[1] > 0.5))


def is_host_sync(op: OpRecord) -> bool:
    dominant = dominant_kernel_category(op)
    return (compute.base_op_name(op.name) in HOST_SYNC_OPS
            or (dominant is not None and dominant[0] == "memcpy" and dominant[1] > 0.5))


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


def _miscategorized(group: OpGroup) -> dict[str, str | None] | None:
    """The first member whose kernels another agent's category holds: its name, that kernel
    category and the agent that owns it (the row `owner_action` of analyzers/advice/generic.toml)."""
    seen = {op.name: miscategorized_as(op) for op in group.members if miscategorized_as(op)}
    if not seen:
        return None
    name, category = next(iter(seen.items()))
    owner = next(op.dominant_kernel_agent for op in group.members if op.name == name)
    # the action names the category of the first such member (a later one of the same name may differ)
    first_category = next(c for op in group.members if (c := miscategorized_as(op)))
    return {"name": name, "category": category or "", "owner": owner or "", "action_category": first_category}


KIND_FACTS = {"optimizer": "optimizer", "index": "lookup", "embedding": "lookup", "concat": "concat", "rope": "rope",
              "pooling": "pooling", "launched_outside_op": "launched_outside_op"}


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which advice applies to the group (a row of analyzers/advice/generic.toml), with its values."""
    dominant = group.dominant
    miscategorized = _miscategorized(group)
    fact = KIND_FACTS.get(dominant.kind) or ("miscategorized" if miscategorized else "other")
    kernel = dominant.kernels[0].name if dominant.kernels else dominant.name
    rotary = data.ctx.facts.has_rotary and any(
        compute.name_matches(m, ("attention", "attn", "rotary")) for op in group.members for m in op.module_chain)
    return AdviceText(agent=AGENT_NAME, fact=fact, values={
        "module": compute.module_hint(group), "miscategorized": miscategorized, "kernel": kernel,
        "rotary": rotary, "compiled": data.ctx.facts.is_compiled, "op_category": dominant.op_category,
        "q_and_k": compute.takes_q_and_k(dominant), "name": dominant.name, **compute.latency_values(group),
        "attribution_hint": compute.attribution_hint(data.ctx),
        "generic": compute.generic_advice(group, f"`{clip(dominant.name, 80)}`")})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


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
        graph_replay_count=sum(
            1 for op in ops if op.name.endswith(compute.SYNTHETIC_SUFFIX) and "graphlaunch" in op.name.lower()),
        communication_ops_skipped=sorted({op.name for op in ops if op.kind == "communication"}),
        host_sync_ops_skipped=sorted({op.name for op in ops if op.kind != "communication" and is_host_sync(op)}),
        miscategorized={op.name: cat for op in ops if (cat := miscategorized_as(op))},
        relabelled_away_count=len(data.handed_off),
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="uncategorized", classify=classify, advise=advise,
    exclude=exclude, owns_the_rest=True,
    fuses_latency_bound=lambda op: op.kind == "rope",  # the rope row says so; the other rows are about other levers
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Findings for every op no category agent owns: mostly heuristic (no perf model), with
    miscategorization, layout and launch notes; communication and host syncs are skipped."""
    return compute.run_agent(db, ctx, AGENT, GenericMetrics, facts)
