"""Shared compute-tier logic: load a category's ops from `op_perf`, turn each into a record with
its efficiency, bound and library, estimate what tuning it could recover (the TraceLens impact
ladder), group the estimates into P-items and build the agent's findings.

The category agents (`analyzers/gemm.py`, `sdpa.py`, ...) only add what is specific to them: how
an op is classified, which facts go into `category_specific`, and the wording of the advice.

Formulas (reference/tracelens_analyzers.md §2.9-§2.10):
- quantified (the op has a perf model and a roofline): gap = max(0, 1 - efficiency / 100);
  impact_{low,mid,high} = {0.75, 0.875, 1.0} x gap x op time / E2E x 100 (% of E2E); an op whose
  high estimate is under MIN_OP_IMPACT_HIGH is dropped.
- heuristic (no perf model): impact_{low,mid,high} = {0.15, 0.30, 0.45} x op % of E2E.
- efficiency above EFFICIENCY_ANOMALY_PERCENT is a measurement anomaly: no finding, a note.
- ops covered by a high-confidence fusion candidate (ctx.fusion_flagged_ops) get no finding.
- P-items: quantified estimates grouped by (bound, library, efficiency bucket, op family),
  heuristic ones by op name (synthetic ops by kernel type); a group whose summed mid estimate is
  under MIN_PITEM_IMPACT_SCORE is dropped. Unlike TraceLens, every card lists its member ops with their shapes and is titled after
  its dominant op and shape, and the op family keeps unrelated kinds of op apart.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb
from pydantic import BaseModel, Field, SerializeAsAny

from tracelake.analyzers import comparison, settings
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.comparison import SignatureMatch, signature_matches
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Confidence, Finding
from tracelake.core.markdown_text import sql_literal

# ---- names and patterns this module matches on (thresholds are in analyzers/settings.py) ----
RELABEL_KERNEL_NOUNS = {"gemm": "GEMM", "sdpa": "attention", "moe": "MoE", "triton": "Triton"}  # how the notes call them
RELABEL_SOURCE_CATEGORIES = ("other",)  # SPEC §5: ops labelled `other` whose kernels the taxonomy ...
# ... whose kernels are mostly of a kernel category with takes_other_ops in the agent_categories seed
QUALITY_CHECKS_FOR_COMPUTE = (  # trace_quality checks a kernel-time finding depends on (SPEC §5 gate)
    "dropped_events",
    "linked_gpu_time_share",
    "graph_replay",
    "cpu_ops_present",
    "same_stream_overlaps",
    "zero_duration_events",
    "gpu_events_before_window",
)
DATA_TABLE_ROWS = 10  # top operations listed per category (TraceLens' findings show the top ops)
TOP_KERNELS_PER_OP = 5  # kernels kept per op record (most time first)
TITLE_NAME_MAX_CHARS = 60  # op names are clipped in titles; full names stay in the data tables
LEAD_NAME_MAX_CHARS = 100  # ... and in insight sentences
SYNTHETIC_SUFFIX = " (Synthetic Op)"  # op_perf_instances: a kernel no cpu op covers (graph replay, driver launch)
LAYOUT_KERNEL_PATTERN = re.compile(r"transpose|nchw|nhwc|cnhw", re.IGNORECASE)  # layout-only kernels
SOFTMAX_PATTERN = re.compile(r"softmax", re.IGNORECASE)
EAGER_ATTENTION_GEMMS = ("bmm", "baddbmm", "matmul")  # the batched matmuls of eager attention
COMMUNICATION_KEYWORDS = (  # TraceLens generic-op classifier (other_analysis.py), plus the NCCL names
    "all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter", "all_to_all", "alltoall",
    "broadcast", "collective", "nccl", "rccl",
)

Bound = Literal["compute", "memory"]
EffBucket = Literal["0-30", "30-60", "60-100", "unknown"]


# ---- records ------------------------------------------------------------------------------------


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
    impact: Impact | None = None

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

    @property
    def dominant(self) -> OpRecord:
        return self.members[0]

    @property
    def time_ms(self) -> float:
        return sum(op.time_ms for op in self.members)

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
        """Time-weighted mean efficiency of the members, % of roofline."""
        pairs = [(op.efficiency_percent, op.time_ms) for op in self.members if op.efficiency_percent is not None]
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


# ---- small helpers ------------------------------------------------------------------------------


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_json_list(text: str | None) -> list[Any]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return []
    return value if isinstance(value, list) else []


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


_DTYPE_NAMES = {  # TraceLens torch_dtype_map (analysis_utils.format_args), normalized lower-case
    "c10::bfloat16": "bf16", "bfloat16": "bf16", "c10::half": "fp16", "half": "fp16", "float": "fp32",
    "double": "fp64", "long int": "int64", "int": "int32", "bool": "bool", "signed char": "int8",
    "unsigned char": "uint8", "c10::float8_e4m3fn": "fp8", "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2": "fp8", "c10::float8_e5m2fnuz": "fp8", "c10::float4_e2m1fn_x2": "fp4",
}


def dtype_name(raw: Any) -> str:
    text = str(raw or "")
    return _DTYPE_NAMES.get(text.lower(), text)


def _is_shape(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(d, int) for d in value)


def format_args(input_dims: str, input_type: str) -> str:
    """`(d1,d2) dtype` per tensor input, scalars and empty slots dropped (TraceLens format_args)."""
    parts = []
    types = parse_json_list(input_type)
    for i, dims in enumerate(parse_json_list(input_dims)):
        dtype = dtype_name(types[i]) if i < len(types) else ""
        if _is_shape(dims) and dims:
            inner = ",".join(str(d) for d in dims) + ("," if len(dims) == 1 else "")
            parts.append(f"({inner}) {dtype}".strip())
        elif isinstance(dims, list) and dims and all(_is_shape(d) for d in dims):
            tensors = ", ".join("(" + ",".join(str(x) for x in d) + ")" for d in dims if d)
            parts.append(f"[{tensors}] {dtype}".strip())
    return ", ".join(parts)


def compact_shape(input_dims: str, max_tensors: int = 3) -> str:
    """`8944x1024, 1024x2816`: the first tensor shapes of an op, for titles and tables."""
    shapes: list[str] = []
    for dims in parse_json_list(input_dims):
        if _is_shape(dims) and dims:
            shapes.append("x".join(str(d) for d in dims))
        elif isinstance(dims, list) and dims and all(_is_shape(d) for d in dims):
            shapes.append("[" + ", ".join("x".join(str(x) for x in d) for d in dims if d) + "]")
    if len(shapes) > max_tensors:
        shapes = shapes[:max_tensors] + ["..."]
    return ", ".join(shapes)


def kind_totals(ops: Sequence[OpRecord]) -> tuple[dict[str, int], dict[str, float]]:
    """Op signatures and their kernel time (ms) per agent classification (`op.kind`)."""
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    for op in ops:
        counts[op.kind] = counts.get(op.kind, 0) + 1
        times[op.kind] = times.get(op.kind, 0.0) + op.time_ms
    return counts, times


def efficiency_bucket(efficiency_percent: float | None) -> EffBucket:
    """TraceLens buckets: below 30, below 60, else 60-100; None -> unknown."""
    if efficiency_percent is None:
        return "unknown"
    low, high = settings.EFFICIENCY_BUCKETS
    if efficiency_percent < low:
        return "0-30"
    if efficiency_percent < high:
        return "30-60"
    return "60-100"


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def name_matches(name: str, keywords: Iterable[str]) -> bool:
    lowered = name.lower()
    return any(k in lowered for k in keywords)


def base_op_name(name: str) -> str:
    """`aten::add_` -> `add`: the op without namespace and in-place suffix."""
    base = name.split("::")[-1].split("->")[0].strip()
    return base.rstrip("_").lstrip("_") or base


# ---- the impact ladder --------------------------------------------------------------------------


def quantified_impact(time_ms: float, e2e_ms: float, efficiency_percent: float,
                      attainable_percent: float = 100.0) -> Impact:
    """Gap to the attainable share of the roofline x op share of E2E, in % of E2E, at 75 / 87.5 /
    100 % of the gap closed (TraceLens closes the gap to 100 %; nothing runs at 100 % of peak)."""
    gap = max(0.0, 1.0 - efficiency_percent / attainable_percent)
    share = time_ms / e2e_ms * 100.0
    return Impact(
        method="quantified",
        low=settings.TARGET_LOW * gap * share,
        mid=settings.TARGET_MID * gap * share,
        high=settings.TARGET_HIGH * gap * share,
    )


def heuristic_impact(percent_of_e2e: float) -> Impact:
    """An unmodeled op: 15 / 30 / 45 % of its share of E2E."""
    return Impact(
        method="heuristic",
        low=settings.HEURISTIC_FRACTION_LOW * percent_of_e2e,
        mid=settings.HEURISTIC_FRACTION_MID * percent_of_e2e,
        high=settings.HEURISTIC_FRACTION_HIGH * percent_of_e2e,
    )


def estimate_op_impact(op: OpRecord, ctx: AnalysisContext) -> Impact | None:
    """The ladder for one op, or None when the op gets no tuning estimate."""
    if op.excluded or op.name in ctx.fusion_flagged_ops or op.time_ms <= 0 or ctx.e2e_time_ms <= 0:
        return None
    if ctx.comparison_scope == "comparative":
        # the measured gap to trace 2 and nothing else: no heuristic for unmatched ops
        if op.comparison is None or op.efficiency_percent is None or op.efficiency_percent >= 100.0:
            return None
        impact = quantified_impact(op.time_ms, ctx.e2e_time_ms, op.efficiency_percent)
        return impact if impact.high >= settings.MIN_OP_IMPACT_HIGH else None
    if op.efficiency_percent is not None and op.has_perf_model:
        if op.is_anomaly or op.is_near_roofline:
            return None
        impact = _above_kernel_floor(
            quantified_impact(op.time_ms, ctx.e2e_time_ms, op.efficiency_percent, op.attainable_percent), op, ctx)
        return impact if impact.high >= settings.MIN_OP_IMPACT_HIGH else None
    if op.percent_of_e2e > 0:
        return heuristic_impact(op.percent_of_e2e)
    return None


def _above_kernel_floor(impact: Impact, op: OpRecord, ctx: AnalysisContext) -> Impact:
    """No kernel gets faster than settings.KERNEL_TIME_FLOOR_US: an op of many tiny kernels cannot
    recover more than its time above that floor, whatever its distance to the roofline."""
    kernels = op.kernel_count or sum(k.count for k in op.kernels)
    cap = 100.0 * max(0.0, op.time_ms - kernels * settings.KERNEL_TIME_FLOOR_US / 1000.0) / ctx.e2e_time_ms
    if impact.high <= cap:
        return impact
    scale = cap / impact.high if impact.high > 0 else 0.0
    return Impact(method=impact.method, low=impact.low * scale, mid=impact.mid * scale, high=cap)


def sum_impacts(impacts: Sequence[Impact]) -> Impact:
    return Impact(
        method=impacts[0].method,
        low=sum(i.low for i in impacts),
        mid=sum(i.mid for i in impacts),
        high=sum(i.high for i in impacts),
    )


def heuristic_group_name(op: OpRecord) -> str:
    """Heuristic estimates group by op name (one op over several shapes); synthetic ops, whose
    names carry the kernel name, group by the kernel type instead."""
    if op.name.endswith(SYNTHETIC_SUFFIX):
        kernel_type = op.kernels[0].kernel_type if op.kernels else "unknown"
        return f"launched outside any op ({kernel_type} kernels)"
    return op.name


def group_ops(ops: Sequence[OpRecord], family: Callable[[OpRecord], str],
              comparative: bool = False) -> tuple[list[OpGroup], list[OpGroup]]:
    """P-items from ops that carry an impact: (kept groups, dropped groups), highest mid first.
    Comparative groups do not split by efficiency bucket (TraceLens: bucket "all")."""
    keyed: dict[tuple[str, ...], list[OpRecord]] = defaultdict(list)
    for op in ops:
        if op.impact is None:
            continue
        if op.impact.method == "quantified":
            bucket = "all" if comparative else efficiency_bucket(op.efficiency_percent)
            key = ("quantified", op.bound or "unknown", op.library, bucket, family(op))
        else:
            key = ("heuristic", "unmodeled", op.library, "unknown", heuristic_group_name(op))
        keyed[key].append(op)
    groups = []
    for (method, bound, library, bucket, fam), members in keyed.items():
        members = sorted(members, key=lambda o: (-(o.impact.mid if o.impact else 0.0), -o.time_ms))
        groups.append(OpGroup(
            bound=bound, library=library, bucket=bucket, family=fam,
            estimate_method=method,  # type: ignore[arg-type]
            members=members, impact=sum_impacts([m.impact for m in members if m.impact]),
            comparative=comparative and method == "quantified",
        ))
    groups.sort(key=lambda g: (-g.impact.mid, -g.time_ms))
    kept = [g for g in groups if g.impact.mid >= settings.MIN_PITEM_IMPACT_SCORE]
    dropped = [g for g in groups if g.impact.mid < settings.MIN_PITEM_IMPACT_SCORE]
    return kept, dropped


# ---- loading ------------------------------------------------------------------------------------

_OP_ROWS_SQL = """
select
    p.signature_key, p.name, p.op_category, p.input_dims, p.input_type, p.input_strides,
    p.concrete_inputs, p.operation_count, p.kernel_time_sum_us, p.kernel_time_mean_us,
    p.has_perf_model, p.gflops, p.data_moved_mib, p.flops_per_byte, p.compute_spec, p.perf_params,
    p.tflops_per_s_mean, p.tb_per_s_mean, p.pct_roofline_mean, p.roofline_time_us, p.roofline_bound,
    p.module_chain, p.example_op_id, peaks.peak_tflops, platforms.mem_bw_gbps / 1000.0 as peak_tb_per_s
from op_perf as p
left join platform_peaks as peaks
    on peaks.platform = p.platform and peaks.compute_spec = p.compute_spec
left join platforms
    on platforms.platform = p.platform
where p.trace_id = $trace_id and p.platform = $platform
    and ($categories is null or list_contains($categories, p.op_category))
order by p.kernel_time_sum_us desc, p.signature_key
"""

# The GPU kernels of each op signature (op_perf_kernels), grouped by kernel name and taxonomy.
_OP_KERNELS_SQL = """
select signature_key, kernel_name, kernel_category, kernel_type, library, kernel_precision,
    count(*) as kernel_count, sum(dur_us) as time_us
from op_perf_kernels
where trace_id = $trace_id and platform = $platform and list_contains($signature_keys, signature_key)
group by all
order by signature_key, time_us desc, kernel_name
"""

# The GPU events behind some op signatures: a compute finding's claims (finding_kernels).
_CLAIMED_KERNELS_SQL = """
select event_idx, any_value(dur_us) as dur_us
from op_perf_kernels
where trace_id = $trace_id and platform = $platform and list_contains($signature_keys, signature_key)
    and not list_contains($system_kernel_categories, kernel_category)
group by event_idx
"""


def claimed_kernels(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, signature_keys: Sequence[str]) -> dict[int, float]:
    """event_idx -> dur_us of every GPU event the signatures' instances own, copies and fills left
    to the transfer findings."""
    params = {"trace_id": ctx.trace_id, "platform": ctx.platform, "signature_keys": list(signature_keys),
              "system_kernel_categories": sorted(load_agent_categories(db).system_kernel_categories)}
    return {int(idx): float(dur) for idx, dur in db.execute(_CLAIMED_KERNELS_SQL, params).fetchall()}


_LIBRARY_NAME_RULES = (  # TraceLens classify_kernel_library, op-name rules
    ("aiter::", "aiter"), ("rocm_aiter", "aiter"), ("fbgemm", "FBGEMM"), ("miopen", "MIOpen"), ("triton", "Triton"),
)
_NO_LIBRARY = {"unknown", "runtime", ""}


def library_from_name(name: str) -> str | None:
    lowered = name.lower()
    for marker, library in _LIBRARY_NAME_RULES:
        if marker in lowered:
            return library
    return None


def _dominant_library(kernels: Sequence[KernelShare], op_name: str) -> str:
    """The library of most of the op's kernel time (taxonomy), else op-name rules, else Unknown."""
    by_library: dict[str, float] = defaultdict(float)
    for k in kernels:
        if k.library not in _NO_LIBRARY:
            by_library[k.library] += k.time_us
    if by_library:
        return max(sorted(by_library), key=lambda lib: by_library[lib])
    return library_from_name(op_name) or "Unknown"


def load_platform_peaks(db: duckdb.DuckDBPyConnection, platform: str) -> tuple[dict[str, float], float | None]:
    """(compute_spec -> peak TFLOPS, HBM peak TB/s) of the platform, from the seeds."""
    peaks = {spec: tflops for spec, tflops in db.execute(
        "select compute_spec, peak_tflops from platform_peaks where platform = ?", [platform]
    ).fetchall()}
    row = db.execute("select mem_bw_gbps / 1000.0 from platforms where platform = ?", [platform]).fetchone()
    return peaks, (row[0] if row else None)


def load_op_rows(
    db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, categories: Sequence[str] | None
) -> list[OpRecord]:
    """The trace's op_perf rows on ctx.platform for `categories` (None: every category), largest
    kernel time first, with their kernels' library and taxonomy categories."""
    records = _query_op_records(db, ctx, categories)
    if ctx.comparison_scope == "comparative" and ctx.trace2_id:
        _apply_comparison(records, signature_matches(
            db, ctx.trace_id, ctx.platform, ctx.trace2_id, ctx.platform2 or ctx.platform))
    return records


def _apply_comparison(records: list[OpRecord], matches: dict[str, SignatureMatch]) -> None:
    """Comparative scope: each op's efficiency becomes 100 x t2 / t1, raised to its roofline value
    when lower (TraceLens' roofline cap); unmatched ops have none."""
    for record in records:
        match = matches.get(record.signature_key)
        record.comparison = match
        efficiency = match.efficiency_percent if match is not None else None
        if efficiency is not None and record.roofline_percent is not None and efficiency < record.roofline_percent:
            efficiency, record.efficiency_capped = record.roofline_percent, True
        record.efficiency_percent = efficiency


def _query_op_records(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext,
                       categories: Sequence[str] | None) -> list[OpRecord]:
    params = {"trace_id": ctx.trace_id, "platform": ctx.platform,
              "categories": None if categories is None else list(categories)}
    cursor = db.execute(_OP_ROWS_SQL, params)
    columns = [d[0] for d in cursor.description]
    rows = [dict(zip(columns, r)) for r in cursor.fetchall()]
    kernels_by_op: dict[str, list[KernelShare]] = defaultdict(list)
    if rows:
        kernel_params = {"trace_id": ctx.trace_id, "platform": ctx.platform,
                         "signature_keys": [row["signature_key"] for row in rows]}
        for key, name, kcat, ktype, library, precision, count, time_us in db.execute(
                _OP_KERNELS_SQL, kernel_params).fetchall():
            kernels_by_op[key].append(KernelShare(
                name=name, kernel_category=kcat, kernel_type=ktype, library=library,
                kernel_precision=precision, count=count, time_us=time_us or 0.0,
            ))
    e2e = ctx.e2e_time_ms
    records = []
    for row in rows:
        kernels = kernels_by_op.get(row["signature_key"], [])
        total_kernel_us = sum(k.time_us for k in kernels)
        shares: dict[str, float] = defaultdict(float)
        for k in kernels:
            if total_kernel_us > 0:
                shares[k.kernel_category] += k.time_us / total_kernel_us
        precisions = [k.kernel_precision for k in kernels if k.kernel_precision]
        layout_us = sum(k.time_us for k in kernels if LAYOUT_KERNEL_PATTERN.search(k.name))
        time_ms = (row["kernel_time_sum_us"] or 0.0) / 1000.0
        bound = {"COMPUTE_BOUND": "compute", "MEMORY_BOUND": "memory"}.get(row["roofline_bound"] or "")
        records.append(OpRecord(
            signature_key=row["signature_key"],
            name=row["name"],
            op_category=row["op_category"],
            input_dims=row["input_dims"] or "",
            input_type=row["input_type"] or "",
            input_strides=row["input_strides"] or "",
            concrete_inputs=row["concrete_inputs"] or "",
            args=format_args(row["input_dims"] or "", row["input_type"] or ""),
            shape=compact_shape(row["input_dims"] or ""),
            count=int(row["operation_count"] or 0),
            time_ms=time_ms,
            mean_us=row["kernel_time_mean_us"] or 0.0,
            percent_of_e2e=time_ms / e2e * 100.0 if e2e > 0 else 0.0,
            has_perf_model=bool(row["has_perf_model"]),
            efficiency_percent=row["pct_roofline_mean"],
            roofline_percent=row["pct_roofline_mean"],
            bound=bound,  # type: ignore[arg-type]
            gflops=row["gflops"],
            data_moved_mib=row["data_moved_mib"],
            flops_per_byte=row["flops_per_byte"],
            tflops_per_s=row["tflops_per_s_mean"],
            tb_per_s=row["tb_per_s_mean"],
            compute_spec=row["compute_spec"],
            peak_tflops=row["peak_tflops"],
            peak_tb_per_s=row["peak_tb_per_s"],
            roofline_time_us=row["roofline_time_us"],
            perf_params=parse_json_object(row["perf_params"]),
            module_chain=list(row["module_chain"] or []),
            example_op_id=row["example_op_id"],
            library=_dominant_library(kernels, row["name"]),
            kernel_precision=max(set(precisions), key=precisions.count) if precisions else None,
            kernels=kernels[:TOP_KERNELS_PER_OP],
            kernel_count=sum(k.count for k in kernels),
            kernel_category_shares=dict(shares),
            layout_kernel_time_us=layout_us,
        ))
    return records


def dominant_kernel_category(op: OpRecord) -> tuple[str, float] | None:
    """The taxonomy category of most of the op's kernel time, and its share."""
    if not op.kernel_category_shares:
        return None
    category = max(op.kernel_category_shares, key=op.kernel_category_shares.__getitem__)
    return category, op.kernel_category_shares[category]


def relabel_target(op: OpRecord, relabel_agents: dict[str, str]) -> str | None:
    """The agent an op labelled `other` belongs to when most of its kernel time is of a kernel
    category that agent takes `other` ops of (GEMM, attention), else None."""
    if op.op_category not in RELABEL_SOURCE_CATEGORIES:
        return None
    for kernel_category, agent in relabel_agents.items():
        if op.kernel_category_shares.get(kernel_category, 0.0) > settings.RELABEL_MIN_KERNEL_SHARE:
            return agent
    return None


def load_agent_ops(
    db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, agent: ComputeAgent
) -> tuple[list[OpRecord], list[OpRecord]]:
    """(the ops `agent` owns, the ops it hands to another agent). An agent owns its categories
    (agent_categories seed) plus the re-labelled `other` ops meant for it; the generic agent owns
    every category no other agent owns, minus the re-labelled ops (which it hands off)."""
    owners = load_agent_categories(db)
    takes_relabelled = agent.name in owners.relabel_agents.values()
    owned = owners.owned_by(agent.name)
    if agent.owns_the_rest:
        candidates = [op for op in load_op_rows(db, ctx, None) if op.op_category not in owners.owned]
    else:
        wanted = list(owned) + (list(RELABEL_SOURCE_CATEGORIES) if takes_relabelled else [])
        candidates = load_op_rows(db, ctx, wanted)
    ops, handed_off = [], []
    for op in candidates:
        dominant = dominant_kernel_category(op)
        if dominant is not None and dominant[0] in owners.system_kernel_categories:
            continue  # a copy or fill: the transfer findings' (multi_kernel), never a compute op
        op.dominant_kernel_agent = owners.kernel_agents.get(dominant[0]) if dominant else None
        target = relabel_target(op, owners.relabel_agents)
        if agent.owns_the_rest:
            if target is None:
                ops.append(op)
            else:
                handed_off.append(op.model_copy(update={"analyzed_as": target, "relabelled_from": op.op_category}))
        elif op.op_category in owned:
            ops.append(op)
        elif target == agent.name:
            ops.append(op.model_copy(update={"relabelled_from": op.op_category}))
    for op in ops:
        op.analyzed_as = agent.name
    return ops, handed_off


# ---- findings -----------------------------------------------------------------------------------

QUALITY_ORDER: tuple[Confidence, ...] = ("high", "medium", "low")


def _lower(confidence: Confidence, steps: int = 1) -> Confidence:
    return QUALITY_ORDER[min(len(QUALITY_ORDER) - 1, QUALITY_ORDER.index(confidence) + steps)]


def finding_confidence(group: OpGroup, ctx: AnalysisContext) -> tuple[Confidence, list[str]]:
    """high for a perf-model estimate, medium for a heuristic or re-labelled one; one step lower
    per warned trace-quality check class (any warn -> one step, any fail -> low)."""
    reasons = []
    if group.estimate_method == "quantified":
        confidence: Confidence = "high"
        reasons.append("perf model and roofline for every member")
    else:
        confidence = "medium"
        reasons.append("no perf model: heuristic share of the op's time")
    if group.relabelled:
        confidence = max(confidence, "medium", key=QUALITY_ORDER.index)
        reasons.append("category re-labelled from kernel names")
    verdicts = {name: ctx.quality_verdicts.get(name) for name in QUALITY_CHECKS_FOR_COMPUTE}
    failed = sorted(n for n, v in verdicts.items() if v == "fail")
    warned = sorted(n for n, v in verdicts.items() if v == "warn")
    if failed:
        confidence = "low"
        reasons.append("trace-quality check failed: " + ", ".join(failed))
    elif warned:
        confidence = _lower(confidence)
        reasons.append("trace-quality warning: " + ", ".join(warned))
    return confidence, reasons


def _chain_evidence_sql(group: OpGroup, ctx: AnalysisContext, keys: str) -> str:
    """A chain group (one fused kernel replacing every member): efficiency = the GEMM members'
    roofline time over the chain's kernel time; the ladder then applies to the chain's share."""
    if group.estimate_method == "quantified":
        gap = "greatest(0, 1 - chain.fused_roofline_ms / chain.chain_time_ms)"
        factors = (settings.TARGET_LOW, settings.TARGET_MID, settings.TARGET_HIGH)
    else:
        gap = "1"
        factors = (settings.HEURISTIC_FRACTION_LOW, settings.HEURISTIC_FRACTION_MID, settings.HEURISTIC_FRACTION_HIGH)
    share = "chain.chain_time_ms / chain.total_time_ms * 100"
    return (
        "with members as (\n"
        "    select p.name, p.op_category, p.input_dims, p.operation_count, p.kernel_time_sum_us, p.roofline_time_us,\n"
        "        p.pct_roofline_mean, t.total_time_ms\n"
        "    from op_perf as p\n"
        "    inner join gpu_timeline as t on t.trace_id = p.trace_id\n"
        f"    where p.trace_id = {sql_literal(ctx.trace_id)} and p.platform = {sql_literal(ctx.platform)}\n"
        f"        and p.signature_key in ({keys})\n"
        "),\n"
        "chain as (\n"
        "    select sum(kernel_time_sum_us) / 1000.0 as chain_time_ms,\n"
        "        sum(case when op_category = 'GEMM' then roofline_time_us * operation_count end) / 1000.0 as fused_roofline_ms,\n"
        "        any_value(total_time_ms) as total_time_ms\n"
        "    from members\n"
        ")\n"
        "select members.name, members.op_category, members.input_dims, members.operation_count,\n"
        "    members.kernel_time_sum_us / 1000.0 as time_ms, members.pct_roofline_mean as efficiency_percent,\n"
        "    chain.chain_time_ms, chain.fused_roofline_ms,\n"
        f"    {factors[0]} * {gap} * {share} as chain_impact_low,\n"
        f"    {factors[1]} * {gap} * {share} as chain_impact_mid,\n"
        f"    {factors[2]} * {gap} * {share} as chain_impact_high\n"
        "from members cross join chain\n"
        "order by members.kernel_time_sum_us desc"
    )


def evidence_sql(group: OpGroup, ctx: AnalysisContext) -> str:
    """SQL over op_perf and gpu_timeline that reproduces the members' numbers and impacts."""
    keys = ", ".join(sql_literal(op.signature_key) for op in group.members)
    if group.comparative and ctx.trace2_id:
        return comparison.evidence_sql(ctx.trace_id, ctx.platform, ctx.trace2_id, ctx.platform2 or ctx.platform,
                                       [(op.name, op.input_dims, op.input_type) for op in group.members])
    if group.chain:
        return _chain_evidence_sql(group, ctx, keys)
    share = "p.kernel_time_sum_us / 1000.0 / t.total_time_ms * 100"
    # each member's attainable share of its roofline (agent setting), inlined
    attainable = ", ".join(f"({sql_literal(op.signature_key)}, {op.attainable_percent!r})" for op in group.members)
    if group.estimate_method == "quantified":
        gap = "greatest(0, 1 - p.pct_roofline_mean / a.attainable_percent)"
        # no kernel faster than the floor: the high estimate stops at the time above count x floor
        floor = (f"greatest(0, p.kernel_time_sum_us - kc.kernel_count * {settings.KERNEL_TIME_FLOOR_US!r}) "
                 "/ 1000.0 / t.total_time_ms * 100")
        scale = f"coalesce(least(1, {floor} / nullif({gap} * {share}, 0)), 0)"
        impacts = (
            f"{settings.TARGET_LOW} * {gap} * {share} * {scale} as impact_low,\n"
            f"    {settings.TARGET_MID} * {gap} * {share} * {scale} as impact_mid,\n"
            f"    {settings.TARGET_HIGH} * {gap} * {share} * {scale} as impact_high"
        )
    else:
        impacts = (
            f"{settings.HEURISTIC_FRACTION_LOW} * {share} as impact_low,\n"
            f"    {settings.HEURISTIC_FRACTION_MID} * {share} as impact_mid,\n"
            f"    {settings.HEURISTIC_FRACTION_HIGH} * {share} as impact_high"
        )
    return (
        f"with a(signature_key, attainable_percent) as (values {attainable}),\n"
        "kc as (\n"
        "    select signature_key, count(*) as kernel_count from op_perf_kernels\n"
        f"    where trace_id = {sql_literal(ctx.trace_id)} and platform = {sql_literal(ctx.platform)}\n"
        f"        and signature_key in ({keys})\n"
        "    group by signature_key\n"
        ")\n"
        "select p.name, p.op_category, p.input_dims, p.operation_count,\n"
        "    p.kernel_time_sum_us / 1000.0 as time_ms,\n"
        f"    {share} as percent_of_e2e,\n"
        "    p.has_perf_model, p.pct_roofline_mean as efficiency_percent, a.attainable_percent, p.roofline_bound,\n"
        f"    {impacts}\n"
        "from op_perf as p\n"
        "inner join gpu_timeline as t on t.trace_id = p.trace_id\n"
        "inner join a on a.signature_key = p.signature_key\n"
        "left join kc on kc.signature_key = p.signature_key\n"
        f"where p.trace_id = {sql_literal(ctx.trace_id)} and p.platform = {sql_literal(ctx.platform)}\n"
        f"    and p.signature_key in ({keys})\n"
        "order by p.kernel_time_sum_us desc"
    )


KNOWN_BOUNDS = ("compute", "memory")
KNOWN_BUCKETS = ("0-30", "30-60", "60-100")  # efficiency_bucket's; "unknown" and "all" (comparative) say nothing


def group_phrase(group: OpGroup) -> str:
    """What a quantified group shares, in words: only the facts it has (no 'unknown-bound', no
    'all' bucket of a comparative run)."""
    parts = [f"{group.bound}-bound"] if group.bound in KNOWN_BOUNDS else []
    if group.bucket in KNOWN_BUCKETS:
        parts.append(f"efficiency bucket {group.bucket} %")
    return ", ".join(parts) or "one op family"


def efficiency_phrase(group: OpGroup) -> str:
    span = group.efficiency_range
    if span is None:
        return "an unknown share of the roofline"
    low, high = span
    value = f"{low:.1f} %" if abs(high - low) < 0.05 else f"{low:.1f}-{high:.1f} %"
    return f"{value} of the {group.bound}-bound roofline" if group.bound in KNOWN_BOUNDS else f"{value} of the roofline"


def trace2_time_ms(group: OpGroup) -> float:
    return sum(op.comparison.time_trace2_ms for op in group.members if op.comparison is not None)


def group_title(group: OpGroup) -> str:
    if group.title:
        return group.title
    dominant = group.dominant
    more = f" +{len(group.members) - 1} more" if len(group.members) > 1 else ""
    library = f" ({group.library})" if group.library != "Unknown" else ""
    if group.comparative:
        t2 = trace2_time_ms(group)
        ratio = f"{group.time_ms / t2:.2f}x the time of trace 2" if t2 > 0 else "no time on trace 2"
        return f"{dominant.label}{more}: trace 1 takes {ratio}{library}"
    if group.estimate_method == "heuristic":
        return f"{dominant.label}{more}: {group.percent_of_e2e:.1f} % of E2E without a perf model{library}"
    span = group.efficiency_range
    eff = ("an unknown share" if span is None else
           f"{_percent_text(span[0])}-{_percent_text(span[1])} %" if _percent_text(span[0]) != _percent_text(span[1])
           else f"{_percent_text(span[0])} %")
    bound = f"{group.bound}-bound at " if group.bound in KNOWN_BOUNDS else "at "
    return f"{dominant.label}{more}: {bound}{eff} of roofline{library}"


def _percent_text(value: float) -> str:
    """A title's efficiency: whole percents, one decimal below 1 % (0.4 %, not 0 %)."""
    return f"{value:.1f}" if value < 1.0 else f"{value:.0f}"


def lead_insight(group: OpGroup, noun: str) -> str:
    dominant = group.dominant
    n = len(group.members)
    what = f"`{clip(dominant.name, LEAD_NAME_MAX_CHARS)}`" + (f" ({dominant.shape})" if dominant.shape else "")
    scope = f"{n} {noun} op signatures led by {what}" if n > 1 else f"The {noun} op {what}"
    verb = "take" if n > 1 else "takes"
    calls = f"{group.call_count} call{'s' if group.call_count != 1 else ''}"
    where = f" on {group.library} kernels" if group.library != "Unknown" else ""
    if group.comparative:
        t2 = trace2_time_ms(group)
        slower = 100.0 * (group.time_ms - t2) / group.time_ms if group.time_ms > 0 else 0.0
        capped = sum(op.efficiency_capped for op in group.members)
        cap = (f" For {capped} of them trace 1 already runs close to its roofline, so the recoverable time is "
               "capped at the roofline gap." if capped else "")
        return (
            f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms on trace 1 ({group.percent_of_e2e:.2f} % of E2E) "
            f"and {t2:.3f} ms on trace 2{where}: trace 1 is {slower:.1f} % slower.{cap}"
        )
    if group.estimate_method == "quantified":
        return (
            f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms ({group.percent_of_e2e:.2f} % of E2E) "
            f"and run{'' if n > 1 else 's'} at {efficiency_phrase(group)}{where}."
        )
    return (
        f"{scope} ({calls}) {verb} {group.time_ms:.3f} ms ({group.percent_of_e2e:.2f} % of E2E){where}; "
        f"there is no perf model for {'them' if n > 1 else 'it'}, so the distance to the roofline is unknown."
    )


def relabel_sentence(ops: Sequence[OpRecord], noun: str, group_size: int) -> str:
    if not ops:
        return ""
    sources = "`, `".join(sorted({op.relabelled_from or "" for op in ops}))
    reason = f"the kernel taxonomy recognises most of {{}} kernel time as {noun} kernels, so {{}} re-labelled and analyzed here."
    if len(ops) == 1 and group_size == 1:
        return f"The op was labelled `{sources}` by the op categorizer; " + reason.format("its", "it was")
    names = ", ".join(f"`{clip(op.name, TITLE_NAME_MAX_CHARS)}`" for op in ops[:3]) + (" ..." if len(ops) > 3 else "")
    return f"{len(ops)} of these ops ({names}) were labelled `{sources}` by the op categorizer; " + reason.format("their", "they were")


def comparative_members_table(group: OpGroup) -> str:
    lines = [
        "| Operation | Shape | Count (T1/T2) | Trace 1 (ms) | Trace 2 (ms) | Difference (ms) | Efficiency (100·t2/t1) "
        "| % Roofline (T1) | Bound (T1) | Impact mid (% E2E) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for op in group.members:
        match = op.comparison
        t2 = match.time_trace2_ms if match else None
        count2 = f"{match.count_trace2:.0f}" if match else "—"
        efficiency = fmt(op.efficiency_percent, 1) + (" (capped)" if op.efficiency_capped else "")
        name = op.name.replace("|", "\\|")
        lines.append(
            f"| `{name}` | {op.args or op.shape or '—'} | {op.count}/{count2} | {op.time_ms:.3f} | "
            f"{fmt(t2, 3)} | {fmt(None if t2 is None else t2 - op.time_ms, 3)} | {efficiency} | "
            f"{fmt(op.roofline_percent, 1)} | {op.bound or '—'} | {fmt(op.impact.mid if op.impact else None, 3)} |"
        )
    return "\n".join(lines)


def members_table(group: OpGroup) -> str:
    if group.comparative:
        return comparative_members_table(group)
    lines = [
        "| Operation | Shape | Count | Time (ms) | % E2E | % Roofline | Bound | Library | Impact mid (% E2E) |",
        "|---|---|---:|---:|---:|---:|---|---|---:|",
    ]
    for op in group.members:
        name = op.name.replace("|", "\\|")
        relabel = f" (re-labelled from {op.relabelled_from})" if op.relabelled_from else ""
        lines.append(
            f"| `{name}`{relabel} | {op.args or op.shape or '—'} | {op.count} | {op.time_ms:.3f} | "
            f"{op.percent_of_e2e:.2f} | {fmt(op.efficiency_percent, 1)} | {op.bound or '—'} | {op.library} | "
            f"{fmt(op.impact.mid if op.impact else None, 3)} |"
        )
    return "\n".join(lines)


def impact_explanation(group: OpGroup, e2e_ms: float) -> str:
    i = group.impact
    recoverable = i.mid * e2e_ms / 100.0
    if group.comparative:
        formula = (
            "per member, efficiency = 100 x t2 / t1 (raised to trace 1's roofline value when lower), "
            "gap = 1 - efficiency / 100 and impact = {0.75, 0.875, 1.0} x gap x t1 / E2E(trace 1) x 100, "
            "summed over the members"
        )
    elif group.estimate_method == "quantified":
        attainable = sorted({m.attainable_percent for m in group.members})
        reach = (f"{attainable[0]:g} %" if len(attainable) == 1 else f"{attainable[0]:g}-{attainable[-1]:g} %")
        formula = (
            f"per member, gap = 1 - efficiency / attainable ({reach} of the roofline: what these ops reach on this "
            "GPU) and impact = {0.75, 0.875, 1.0} x gap x time / E2E x 100, summed over the members"
        )
    else:
        formula = ("no perf model, a heuristic guess: impact = {0.15, 0.30, 0.45} x the ops' share of E2E "
                   "(not a measured distance to any roofline)")
    return (
        f"- Low: {i.low:.3f} % of E2E, mid: {i.mid:.3f} %, high: {i.high:.3f} % ({group.estimate_method}; {formula}).\n"
        f"- Mid estimate in time: {recoverable:.3f} ms of the {e2e_ms:.3f} ms E2E."
    )


def build_finding(rank: int, group: OpGroup, agent: ComputeAgent, data: AgentData) -> Finding:
    ctx = data.ctx
    advice = agent.advise(group, data)
    title = group_title(group)
    # the agent that owns the rest calls a group of a named category (RoPE_fwd, MoE_aux, ...) by it
    category = group.dominant.op_category
    noun = category if agent.owns_the_rest and category not in ("", "other") else agent.noun
    insight = " ".join(s for s in (lead_insight(group, noun), relabel_sentence(group.relabelled, agent.noun, len(group.members)), advice.insight) if s)
    confidence, reasons = finding_confidence(group, ctx)
    modules = next((chain for op in group.members if (chain := [m for m in op.module_chain if m != "root"])), [])
    layer = " > ".join(modules[-3:]) if modules else "outside every nn.Module (or no module information in the trace)"
    identification = (
        f"{lead_insight(group, agent.noun)} Model layer: {layer}. Library (kernel taxonomy): {group.library}. "
        + (f"Group: {group_phrase(group)}, family `{group.family}`."
           if group.estimate_method == "quantified" else
           f"Group: no perf model, grouped by op (`{clip(group.family, TITLE_NAME_MAX_CHARS)}`).")
        + (" " + relabel_sentence(group.relabelled, agent.noun, len(group.members)) if group.relabelled else "")
    )
    details = "\n\n".join([
        f"**Identification:** {identification}",
        "**Data:**\n\n" + members_table(group),
        f"**Reasoning:** {advice.reasoning}",
        f"**Resolution:** {advice.resolution}",
        "**Impact estimate:**\n\n" + impact_explanation(group, ctx.e2e_time_ms)
        + f"\n- Confidence: {confidence} ({'; '.join(reasons)}).",
    ])
    slug = re.sub(r"[^a-z0-9]+", "-", f"{group.bound}-{group.library}-{group.bucket}-{group.family}".lower()).strip("-")
    impact = group.impact
    return Finding(
        finding_id=f"{agent.name}:p{rank}-{slug}"[:120],
        agent=agent.name,
        tier="compute",
        category=agent.name,
        title=title,
        insight=insight,
        action=advice.action,
        impact_low=impact.low,
        impact_score=impact.mid,
        impact_high=impact.high,
        recoverable_ms=impact.mid * ctx.e2e_time_ms / 100.0,
        estimate_method=group.estimate_method,
        confidence=confidence,
        evidence={
            "e2e_time_ms": ctx.e2e_time_ms,
            "platform": ctx.platform,
            "group": {"bound": group.bound, "library": group.library, "efficiency_bucket": group.bucket, "family": group.family},
            "time_ms": group.time_ms,
            "percent_of_e2e": group.percent_of_e2e,
            "call_count": group.call_count,
            "weighted_efficiency_percent": group.weighted_efficiency,
            "confidence_reasons": reasons,
            "members": [
                {
                    "signature_key": op.signature_key, "name": op.name, "op_category": op.op_category,
                    "relabelled_from": op.relabelled_from, "args": op.args, "count": op.count,
                    "time_ms": op.time_ms, "percent_of_e2e": op.percent_of_e2e,
                    "efficiency_percent": op.efficiency_percent, "bound": op.bound, "library": op.library,
                    "flops_per_byte": op.flops_per_byte, "kind": op.kind,
                    "impact_low": op.impact.low if op.impact else None,
                    "impact_mid": op.impact.mid if op.impact else None,
                    "impact_high": op.impact.high if op.impact else None,
                }
                for op in group.members
            ],
        },
        evidence_sql=evidence_sql(group, ctx),
        operations=[f"{op.name} {op.args}".strip() for op in group.members],
        details=details,
    )


# ---- the agent run ------------------------------------------------------------------------------


def summary_notes(ops: Sequence[OpRecord], ctx: AnalysisContext) -> list[str]:
    """Notes on ops that get no tuning finding: anomalies, fusion-covered ops, exclusions."""
    notes = []
    for op in ops:
        if op.is_anomaly:
            notes.append(
                f"`{op.name}` ({op.shape or 'no shape'}) reports {op.efficiency_percent:.1f} % of roofline, above "
                f"{settings.EFFICIENCY_ANOMALY_PERCENT:.0f} %: a measurement anomaly (overlapping or mis-attributed "
                "kernels, or a perf model that over-counts), so it gets no tuning finding; verify the measurement."
            )
        elif op.name in ctx.fusion_flagged_ops:
            notes.append(
                f"`{op.name}` ({op.time_ms:.3f} ms) is covered by the fusion candidate "
                f"`{ctx.fusion_flagged_ops[op.name]}`; see Kernel Fusion Opportunities, no kernel-tuning finding here."
            )
        elif op.excluded:
            notes.append(f"`{op.name}` ({op.time_ms:.3f} ms): {op.excluded}")
    if ctx.comparison_scope == "comparative":
        unmatched = [op for op in ops if op.comparison is None]
        notes.append(
            "Comparative run: each op of trace 1 is matched with trace 2 by name, shapes and dtypes (else by model "
            "layer); efficiency = 100 x t2 / t1, below 100 % trace 1 is slower."
            + (f" {len(unmatched)} op signature(s) of trace 1 ({sum(op.time_ms for op in unmatched):.3f} ms) have no "
               "match in trace 2 and get no estimate." if unmatched else ""))
    return notes


def no_data_result(agent: ComputeAgent, metrics: ComputeMetrics) -> AgentResult:
    return AgentResult(
        agent=agent.name, tier="compute", category=agent.name, status="NO_DATA",
        metrics=metrics.model_dump(mode="json"),
    )


def base_metrics(db: duckdb.DuckDBPyConnection, agent: ComputeAgent, ctx: AnalysisContext,
                 peak_hbm: float | None) -> dict[str, Any]:
    return {
        "agent": agent.name,
        "display_name": agent.display_name,
        "trace_id": ctx.trace_id,
        "platform": ctx.platform,
        "comparison_scope": ctx.comparison_scope,
        "e2e_time_ms": ctx.e2e_time_ms,
        "op_categories": None if agent.owns_the_rest else list(load_agent_categories(db).owned_by(agent.name)),
        "peak_hbm_tb_per_s": peak_hbm,
    }


def run_agent(
    db: duckdb.DuckDBPyConnection,
    ctx: AnalysisContext,
    agent: ComputeAgent,
    metrics_model: type[ComputeMetrics],
    facts: Callable[[AgentData], BaseModel],
) -> AgentResult:
    """Load the agent's ops, estimate, group, and build its AgentResult."""
    peaks, peak_hbm = load_platform_peaks(db, ctx.platform)
    ops, handed_off = load_agent_ops(db, ctx, agent)
    data = AgentData(ctx=ctx, ops=ops, platform_peaks=peaks, peak_hbm_tb_per_s=peak_hbm, handed_off=handed_off)
    for op in ops:
        op.kind = agent.classify(op)
    exclusions = agent.exclude(db, ctx, ops) if agent.exclude is not None and ops else {}
    for op in ops:
        op.excluded = exclusions.get(op.signature_key)
        if agent.attainable is not None:
            op.attainable_percent = agent.attainable(op)
        op.impact = estimate_op_impact(op, ctx)
    kept, dropped = group_ops(ops, agent.family or (lambda op: op.kind), ctx.comparison_scope == "comparative")
    extra = agent.extra_groups(db, ctx, data) if agent.extra_groups is not None else []
    if not ops and not extra:
        metrics = metrics_model(**base_metrics(db, agent, ctx, peak_hbm), category_specific=facts(data))
        return no_data_result(agent, metrics)
    if extra:
        known = {op.signature_key for op in ops}
        ops.extend(op for g in extra for op in g.members if op.signature_key not in known)
        ops.sort(key=lambda op: (-op.time_ms, op.signature_key))
        kept += [g for g in extra if g.impact.mid >= settings.MIN_PITEM_IMPACT_SCORE]
        dropped += [g for g in extra if g.impact.mid < settings.MIN_PITEM_IMPACT_SCORE]
        kept.sort(key=lambda g: (-g.impact.mid, -g.time_ms))
    findings = [
        build_finding(rank, group, agent, data).model_copy(update={
            "claimed_kernels": claimed_kernels(db, ctx, [op.signature_key for op in group.members])})
        for rank, group in enumerate(kept, start=1)
    ]
    categories: dict[str, float] = defaultdict(float)
    for op in ops:
        label = f"{op.relabelled_from} (re-labelled)" if op.relabelled_from else op.op_category
        categories[label] += op.time_ms
    total_ms = sum(op.time_ms for op in ops)
    relabelled = [
        RelabelledOp(
            name=op.name, from_category=op.relabelled_from or "",
            kernel_category=max(op.kernel_category_shares, key=op.kernel_category_shares.__getitem__),
            kernel_share_percent=100.0 * max(op.kernel_category_shares.values()), time_ms=op.time_ms,
        )
        for op in ops if op.relabelled_from and op.kernel_category_shares
    ]
    notes = summary_notes(ops, ctx)
    # the ops at their attainable share, before the claims ledger; the report's "fine" line is made
    # after it (analyzers/coverage.py near_roofline_lines: ops a fusion finding owns are left out)
    near = near_roofline_summary(ops, agent.noun, ctx.e2e_time_ms)
    for target in sorted({op.analyzed_as for op in handed_off}):
        moved = [op for op in handed_off if op.analyzed_as == target]
        notes.append(
            f"{len(moved)} op(s) labelled `other` ({sum(op.time_ms for op in moved):.3f} ms) run mostly "
            f"{RELABEL_KERNEL_NOUNS.get(target, target)} kernels and were re-labelled: the {target} agent analyzes them."
        )
    if dropped:
        notes.append(
            f"{len(dropped)} further group(s) stay below the {settings.MIN_PITEM_IMPACT_SCORE} % of E2E reporting "
            f"threshold (together {sum(g.impact.mid for g in dropped):.3f} % of E2E at the mid estimate)."
        )
    metrics = metrics_model(
        **base_metrics(db, agent, ctx, peak_hbm),
        categories_present=dict(categories),
        total_time_ms=total_ms,
        percent_of_e2e=total_ms / ctx.e2e_time_ms * 100.0 if ctx.e2e_time_ms > 0 else 0.0,
        op_count=len(ops),
        call_count=sum(op.count for op in ops),
        modeled_op_count=sum(1 for op in ops if op.has_perf_model),
        relabelled_ops=relabelled,
        top_operations=[
            TopOperation(
                name=op.name, shape=op.shape, args=op.args, count=op.count, time_ms=op.time_ms,
                percent_of_e2e=op.percent_of_e2e, efficiency_percent=op.efficiency_percent, bound=op.bound,
                library=op.library, relabelled_from=op.relabelled_from,
            )
            for op in ops[:DATA_TABLE_ROWS]
        ],
        operations=ops,
        notes=notes,
        groups_below_threshold=len(dropped),
        impact_below_threshold_percent=sum(g.impact.mid for g in dropped),
        near_roofline=near,
        category_specific=facts(data),
    )
    return AgentResult(
        agent=agent.name, tier="compute", category=agent.name, status="OK",
        metrics=metrics.model_dump(mode="json"), findings=findings,
    )


# ---- advice shared by several agents ------------------------------------------------------------


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
            resolution="A faster implementation shortens the op directly; the estimate assumes 15-45 % of its time is recoverable.",
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


# ---- eager attention (bmm -> softmax -> bmm over one score tensor) ------------------------------


def _tensor_shapes(op: OpRecord) -> list[list[int]]:
    return [d for d in op.dims() if _is_shape(d) and d]


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


EAGER_ATTENTION_NOTE = "part of an eager attention pattern (batched matmul, softmax, batched matmul); the sdpa agent analyzes it"


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
