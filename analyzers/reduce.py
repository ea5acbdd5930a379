"""Reduce agent: sums, means, max/min, arg-reductions, scans and softmax. Isolated reductions
should stream their input near HBM bandwidth; reductions inside a norm or attention block are
usually pieces of an unfused kernel."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice

AGENT_NAME = "reduce"
TIER = "compute"
DISPLAY_NAME = "Reduce"

# ---- names and patterns this agent matches on (thresholds are in analyzers/settings.py) ----
KIND_NAMES: dict[str, tuple[str, ...]] = {  # TraceLens reduce spec member classes, by op name
    "softmax": ("softmax", "log_softmax", "_softmax", "_log_softmax", "softmax_backward_data", "_softmax_backward_data"),
    "sum": ("sum", "nansum"),
    "mean": ("mean", "avg", "var", "std", "var_mean", "std_mean"),
    "max": ("max", "amax", "argmax", "maximum"),
    "min": ("min", "amin", "argmin", "minimum"),
    "scan": ("cumsum", "cumprod", "logcumsumexp"),
    "logical": ("all", "any"),
    "norm": ("norm", "linalg_norm", "linalg_vector_norm"),
}
NORM_MODULE_MARKERS = ("norm",)  # TraceLens reduce spec: norm + reduce + scale chains -> fusion
ATTENTION_MODULE_MARKERS = ("attention", "attn")  # TraceLens reduce spec: softmax in an attention parent -> unfused attention


class ReduceFacts(BaseModel):
    softmax_count: int
    kind_counts: dict[str, int]
    in_norm_module_count: int  # reductions inside normalization modules (unfused norm)
    in_attention_module_count: int
    eager_attention_softmax_count: int  # softmax ops left to the sdpa agent
    peak_hbm_tb_per_s: float | None


class ReduceMetrics(ComputeMetrics):
    category_specific: ReduceFacts


def classify(op: OpRecord) -> str:
    base = compute.base_op_name(op.name)
    for kind, names in KIND_NAMES.items():
        if base in names or base.lstrip("_") in names:
            return kind
    if compute.SOFTMAX_PATTERN.search(op.name):
        return "softmax"
    return "other"


def _in_modules(op: OpRecord, markers: tuple[str, ...]) -> bool:
    return any(compute.name_matches(module, markers) for module in op.module_chain)


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which reduce advice applies to the group (a row of analyzers/advice/reduce.toml), with its values."""
    dominant = group.dominant
    module = compute.module_hint(group)
    if any(_in_modules(op, NORM_MODULE_MARKERS) for op in group.members):
        return AdviceText(agent=AGENT_NAME, fact="in_norm_module",
                          values={"module": module, "compiled": data.ctx.facts.is_compiled})
    if dominant.kind == "softmax" and any(_in_modules(op, ATTENTION_MODULE_MARKERS) for op in group.members):
        return AdviceText(agent=AGENT_NAME, fact="softmax_in_attention", values={"module": module})
    if group.estimate_method == "heuristic":
        return AdviceText(agent=AGENT_NAME, fact="unmodelled",
                          values={"generic": compute.generic_advice(group, f"`{dominant.name}`")})
    return AdviceText(agent=AGENT_NAME, fact="isolated",
                      values={"kind": dominant.kind, "efficiency": group.weighted_efficiency or 0.0})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def exclude(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, ops: list[OpRecord]) -> dict[str, str]:
    eager = compute.eager_attention_ops(db, ctx)
    return {op.signature_key: compute.EAGER_ATTENTION_NOTE for op in ops if op.signature_key in eager}


def facts(data: AgentData) -> ReduceFacts:
    ops = data.ops
    counts, _ = compute.kind_totals(ops)
    return ReduceFacts(
        softmax_count=sum(1 for op in ops if compute.SOFTMAX_PATTERN.search(op.name)),
        kind_counts=counts,
        in_norm_module_count=sum(1 for op in ops if _in_modules(op, NORM_MODULE_MARKERS)),
        in_attention_module_count=sum(1 for op in ops if _in_modules(op, ATTENTION_MODULE_MARKERS)),
        eager_attention_softmax_count=sum(1 for op in ops if op.excluded == compute.EAGER_ATTENTION_NOTE),
        peak_hbm_tb_per_s=data.peak_hbm_tb_per_s,
    )


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="reduce",
    classify=classify, advise=advise, exclude=exclude,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Reduce findings: bandwidth gap of reductions, with unfused-norm and attention patterns."""
    return compute.run_agent(db, ctx, AGENT, ReduceMetrics, facts)
