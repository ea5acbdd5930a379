"""The records the compute agents pass around: an op signature (OpRecord) with its kernels and
impact estimate, a P-item (OpGroup), the agents' metrics and the hooks an agent plugs in
(ComputeAgent). Thresholds are in analyzers/settings.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb
from pydantic import BaseModel, Field, SerializeAsAny

from tracelake.analyzers import settings
from tracelake.analyzers.comparison import SignatureMatch
from tracelake.analyzers.compute_text import parse_json_list
from tracelake.analyzers.contracts import AnalysisContext
from tracelake.core.text_format import clip

TITLE_NAME_MAX_CHARS = 60  # op names are clipped in titles; full names stay in the data tables
SYNTHETIC_SUFFIX = " (Synthetic Op)"  # op_perf_instances: a kernel no cpu op covers (graph replay, driver launch)
COMMUNICATION_KEYWORDS = (  # TraceLens generic-op classifier (other_analysis.py), plus the NCCL names
    "all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "all_to_all", "alltoall",
    "broadcast", "collective", "nccl", "rccl",
)

Bound = Literal["compute", "memory"]
EffBucket = Literal["0-30", "30-60", "60-100", "unknown"]


class Impact(BaseModel):
    """Recoverable time in % of E2E: low / mid / high."""

    method: Literal["quantified", "heuristic"]
    low: float
    mid: float
    high: float


class KernelShare(BaseModel):
    name: str
    kernel_category: str
    kernel_type: str
    library: str
    kernel_precision: str | None = None
    count: int
    time_us: float


def reaches_attainable(has_perf_model: bool, efficiency_percent: float | None, attainable_percent: float) -> bool:
    """A modelled op at or above its attainable share of the roofline, and not above the anomaly
    bound (a measurement problem, not a result)."""
    return (has_perf_model and efficiency_percent is not None
            and attainable_percent <= efficiency_percent <= settings.EFFICIENCY_ANOMALY_PERCENT)


class OpRecord(BaseModel):
    """One op signature (an op_perf row) as the compute agents see it."""

    signature_key: str
    name: str
    op_category: str
    analyzed_as: str = ""  # agent that owns the op
    relabelled_from: str | None = None  # original op_category when the op was re-labelled
    input_dims: str = ""
    input_type: str = ""
    input_strides: str = ""
    concrete_inputs: str = ""
    args: str = ""  # "(8944,1024) bf16, (1024,2816) bf16"
    shape: str = ""  # compact: "8944x1024, 1024x2816"; "" when the op has no shapes
    count: int
    time_ms: float
    mean_us: float
    percent_of_e2e: float
    has_perf_model: bool
    # op_perf.pct_roofline_mean; comparative scope: 100 x t2 / t1, raised to the roofline value when
    # lower (trace 1 cannot gain more than its distance to the roofline)
    efficiency_percent: float | None = None
    roofline_percent: float | None = None  # op_perf.pct_roofline_mean of trace 1, in both scopes
    comparison: SignatureMatch | None = None  # comparative scope: the op's match in trace 2
    efficiency_capped: bool = False  # comparative efficiency raised to the roofline value
    bound: Bound | None = None
    gflops: float | None = None
    data_moved_mib: float | None = None
    flops_per_byte: float | None = None
    tflops_per_s: float | None = None
    tb_per_s: float | None = None
    compute_spec: str | None = None
    peak_tflops: float | None = None
    peak_tb_per_s: float | None = None
    roofline_time_us: float | None = None
    perf_params: dict[str, Any] | None = None
    module_chain: list[str] = Field(default_factory=list)
    example_op_id: int | None = None
    library: str = "Unknown"
    kernel_precision: str | None = None
    kernels: list[KernelShare] = Field(default_factory=list)
    kernel_count: int = 0  # GPU events of all its instances (kernels keeps the top kernel names only)
    kernel_category_shares: dict[str, float] = Field(default_factory=dict)  # kernel_category -> share 0..1
    layout_kernel_time_us: float = 0.0  # kernels that only transpose / convert the data layout
    # the agent (agent_categories seed) that owns the taxonomy category of most of the op's kernel time
    dominant_kernel_agent: str | None = None
    kind: str = ""  # the agent's classification (flash, quantized, activation, ...)
    excluded: str | None = None  # why the op gets no tuning finding
    # % of roofline this kind of op reaches on this GPU in practice: recoverable time is measured
    # against it, and an op at or above it is fine (no finding, no claim)
    attainable_percent: float = settings.ATTAINABLE_ROOFLINE_PERCENT
    fused_steps: list[str] = Field(default_factory=list)  # op_fused_steps: steps the op already runs in one kernel
    fusable_at_floor: bool = False  # its agent advises fusing latency-bound ops into a neighbour (ComputeAgent)
    # op_best_observed: the same op on this platform ran this close to the roofline in another trace
    best_observed_percent: float | None = None
    best_observed_trace: str | None = None
    impact: Impact | None = None

    @property
    def slower_trace(self) -> int:
        """Comparative scope: 2 when trace 2 takes longer for the op (the gap is trace 2's to
        recover, and its card says so), else 1."""
        return 2 if self.comparison is not None and (self.efficiency_percent or 0.0) > 100.0 else 1

    @property
    def is_anomaly(self) -> bool:
        """Above the roofline: a measurement or perf-model problem (a comparative efficiency above
        100 % only means trace 2 is slower)."""
        return (self.comparison is None and self.efficiency_percent is not None
                and self.efficiency_percent > settings.EFFICIENCY_ANOMALY_PERCENT)

    @property
    def is_near_roofline(self) -> bool:
        """A modelled op running at or above what this kind of op attains on this GPU."""
        return self.comparison is None and reaches_attainable(
            self.has_perf_model, self.efficiency_percent, self.attainable_percent)

    @property
    def is_latency_bound(self) -> bool:
        """A modelled op whose kernels sit at the launch / latency floor: short on average
        (settings.LATENCY_BOUND_KERNEL_US) with work that would take under the kernel floor even at
        the attainable share of the roofline. Tuning cannot remove its time; fusing it can."""
        if (not self.fusable_at_floor or self.comparison is not None or not self.has_perf_model
                or self.roofline_time_us is None or self.count <= 0):
            return False
        kernels_per_call = max(1.0, self.kernel_count / self.count)
        ideal_us = self.roofline_time_us / kernels_per_call * 100.0 / self.attainable_percent
        return (self.mean_us / kernels_per_call <= settings.LATENCY_BOUND_KERNEL_US
                and ideal_us < settings.KERNEL_TIME_FLOOR_US)

    @property
    def label(self) -> str:
        """The op's name and compact shape, clipped for titles."""
        name = clip(self.name, TITLE_NAME_MAX_CHARS)
        return f"{name} [{self.shape}]" if self.shape else name

    def dims(self) -> list[Any]:
        return parse_json_list(self.input_dims)

    def dtypes(self) -> list[Any]:
        return parse_json_list(self.input_type)


class OpGroup(BaseModel):
    """One P-item: ops sharing bound, library, efficiency bucket and family (or, heuristic, a name)."""

    bound: str  # compute | memory | unmodeled
    library: str
    bucket: str
    family: str
    estimate_method: Literal["quantified", "heuristic"]
    members: list[OpRecord]  # highest impact first
    impact: Impact
    title: str | None = None  # set by agents that build a group themselves (e.g. eager attention)
    comparative: bool = False  # efficiency = 100 x t2 / t1 against trace 2, impact = measured gap
    chain: bool = False  # impact computed over the whole group (fused replacement), not per member
    # how a chain's impact was computed, when not from its members' roofline gaps (the fused-attention
    # FLOP model): replaces the members' efficiency in the insight and the formula in the details
    chain_model: str | None = None

    @property
    def dominant(self) -> OpRecord:
        return self.members[0]

    @property
    def time_ms(self) -> float:
        return sum(op.time_ms for op in self.members)

    @property
    def slower_trace(self) -> int:
        """Comparative scope: the trace whose gap the group's card ranks (group_ops keeps the two apart)."""
        return self.dominant.slower_trace if self.comparative else 1

    @property
    def percent_of_e2e(self) -> float:
        return sum(op.percent_of_e2e for op in self.members)

    @property
    def call_count(self) -> int:
        return sum(op.count for op in self.members)

    @property
    def relabelled(self) -> list[OpRecord]:
        return [op for op in self.members if op.relabelled_from]

    @property
    def efficiency_range(self) -> tuple[float, float] | None:
        values = [op.efficiency_percent for op in self.members if op.efficiency_percent is not None]
        return (min(values), max(values)) if values else None

    @property
    def weighted_efficiency(self) -> float | None:
        """Time-weighted mean % of roofline of the members (trace 1's roofline in a comparison too: the
        advice reads it against the roofline, never the comparative 100 x t2 / t1)."""
        pairs = [(op.roofline_percent, op.time_ms) for op in self.members if op.roofline_percent is not None]
        total = sum(t for _, t in pairs)
        return sum(e * t for e, t in pairs) / total if total > 0 else None


class TopOperation(BaseModel):
    name: str
    shape: str
    args: str
    count: int
    time_ms: float
    percent_of_e2e: float
    efficiency_percent: float | None
    bound: str | None
    library: str
    relabelled_from: str | None = None


class RelabelledOp(BaseModel):
    name: str
    from_category: str
    kernel_category: str
    kernel_share_percent: float
    time_ms: float


class NearRoofline(BaseModel):
    """Modelled ops at or above their attainable share of the roofline: fine, claimed by no finding."""

    op_count: int  # signatures
    time_ms: float
    percent_of_e2e: float
    efficiency_min_percent: float
    efficiency_max_percent: float
    attainable_percent: float  # the lowest attainable share among them
    noun: str  # the agent's noun for its ops ("GEMM", "attention", ...)
    sentence: str  # "... run at 77-84 % of roofline, at or near the attainable 80 % on this GPU: they are fine ..."


def near_roofline_summary(ops: Sequence[OpRecord], noun: str, e2e_ms: float) -> NearRoofline | None:
    fine = [op for op in ops if op.is_near_roofline]
    if not fine:
        return None
    low = min(op.efficiency_percent or 0.0 for op in fine)
    high = max(op.efficiency_percent or 0.0 for op in fine)
    attainable = min(op.attainable_percent for op in fine)
    time_ms = sum(op.time_ms for op in fine)
    span = f"{low:.0f} %" if round(low) == round(high) else f"{low:.0f}-{high:.0f} %"
    return NearRoofline(
        op_count=len(fine), time_ms=time_ms, percent_of_e2e=100.0 * time_ms / e2e_ms if e2e_ms > 0 else 0.0,
        efficiency_min_percent=low, efficiency_max_percent=high, attainable_percent=attainable, noun=noun,
        sentence=(f"{len(fine)} {noun} op signature(s) ({time_ms:.3f} ms, "
                  f"{100.0 * time_ms / e2e_ms if e2e_ms > 0 else 0.0:.1f} % of E2E) run at {span} of roofline, at or "
                  f"near the attainable {attainable:g} % of roofline for these ops: they are fine and claim no "
                  "recoverable time."))


class ComputeMetrics(BaseModel):
    """What every compute agent reports; each agent narrows `category_specific`."""

    agent: str
    display_name: str
    trace_id: str
    platform: str
    comparison_scope: str
    e2e_time_ms: float
    op_categories: list[str] | None  # None: the generic agent (every other category)
    categories_present: dict[str, float] = Field(default_factory=dict)  # op_category -> kernel time ms
    total_time_ms: float = 0.0
    percent_of_e2e: float = 0.0
    op_count: int = 0  # op signatures
    call_count: int = 0  # op invocations
    modeled_op_count: int = 0  # signatures with a perf model
    peak_hbm_tb_per_s: float | None = None
    relabelled_ops: list[RelabelledOp] = Field(default_factory=list)
    top_operations: list[TopOperation] = Field(default_factory=list)
    operations: list[OpRecord] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    groups_below_threshold: int = 0
    impact_below_threshold_percent: float = 0.0
    near_roofline: NearRoofline | None = None  # the modelled ops already at what the GPU attains
    category_specific: SerializeAsAny[BaseModel] | None = None


@dataclass(frozen=True)
class Advice:
    """An agent's category-specific wording for one P-item."""

    insight: str  # sentence(s) appended to the generated lead sentence
    action: str  # one mechanism
    reasoning: str
    resolution: str


@dataclass
class AgentData:
    """What an agent's advice and facts functions may look at."""

    ctx: AnalysisContext
    ops: list[OpRecord]
    platform_peaks: dict[str, float]  # compute_spec -> peak TFLOPS on ctx.platform
    peak_hbm_tb_per_s: float | None
    handed_off: list[OpRecord] = field(default_factory=list)  # re-labelled ops another agent analyzes
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ComputeAgent:
    """One compute agent: its categories and the category-specific hooks."""

    name: str
    display_name: str
    noun: str  # how the text calls the agent's ops and kernels: "GEMM", "attention", ...
    classify: Callable[[OpRecord], str]
    advise: Callable[[OpGroup, AgentData], Advice]
    owns_the_rest: bool = False  # the generic agent: every op category no agent owns (agent_categories seed)
    family: Callable[[OpRecord], str] | None = None  # grouping family; default: the op's kind
    exclude: Callable[[duckdb.DuckDBPyConnection, AnalysisContext, list[OpRecord]], dict[str, str]] | None = None
    extra_groups: Callable[[duckdb.DuckDBPyConnection, AnalysisContext, AgentData], list[OpGroup]] | None = None
    # the attainable % of roofline of one op (default settings.ATTAINABLE_ROOFLINE_PERCENT)
    attainable: Callable[[OpRecord], float] | None = None
    # which of its ops, at the launch / latency floor, are credited and advised as fusing into a
    # neighbour (OpRecord.is_latency_bound): the ops whose advice rows say so; None: none
    fuses_latency_bound: Callable[[OpRecord], bool] | None = None


def kind_totals(ops: Sequence[OpRecord]) -> tuple[dict[str, int], dict[str, float]]:
    """Op signatures and their kernel time (ms) per agent classification (`op.kind`)."""
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    for op in ops:
        counts[op.kind] = counts.get(op.kind, 0) + 1
        times[op.kind] = times.get(op.kind, 0.0) + op.time_ms
    return counts, times
