"""Kernel-fusion analyzer (system tier, experimental): groups of kernels that one fused kernel
could replace, with a projected fused time and the share of E2E it would save.

Candidates come from the op tree and the nn.Module call tree, in this order, each kernel in at
most one candidate:

1. eager attention: a batched matmul, a softmax and a second batched matmul issued in the same
   module (or under the same parent op) -> fused scaled-dot-product attention;
2. module instances: the innermost nn.Module call whose kernels number 2..FUSION_MAX_KERNELS
   (a module with more kernels contributes its runs of consecutive non-GEMM ops instead);
3. op subtrees: for kernels outside any module (backward, traces without module events), the
   outermost cpu op whose subtree launches 2..FUSION_MAX_KERNELS kernels.

Instances with the same signature (label + kernel-type sequence) are grouped into one candidate.
Each instance is split at its GEMM/convolution kernels; a GEMM followed by at most two
elementwise ops is a GEMM epilogue (those ops disappear into the GEMM); any other run of
non-GEMM ops is a fusion chain whose fused time is projected from op_perf_instances bytes and
FLOPs: intermediate tensors no longer round-trip memory.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.common import expected_attention_band, query_rows
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Confidence, Finding

AGENT_NAME = "kernel_fusion"
TIER = "system"

FUSION_MAX_EXAMPLE_OPS = 20  # op ids of the first instance kept in a candidate (for lookups)

# Kernel durations are what the estimate rests on: overlapping same-stream kernels mean they are off.
FUSION_QUALITY_CHECKS = ("same_stream_overlaps",)
BMM_OPS = {"aten::bmm", "aten::matmul", "aten::baddbmm", "aten::einsum"}
SOFTMAX_OPS = {"aten::_softmax", "aten::softmax", "aten::_safe_softmax", "aten::log_softmax", "aten::_log_softmax"}
MATRIX_KERNEL_TYPES = {"gemm", "conv"}
# Kernels that are already the fused form: never eligible, and a barrier between chains.
FUSED_KERNEL_TYPES = {"attention", "triton_fused", "moe", "collective"}
EPILOGUE_KERNEL_TYPES = {"elementwise"}
REDUCTION_OP_WORDS = ("mean", "sum", "var", "std", "amax", "amin", "max", "min", "norm", "softmax", "argmax", "all", "any")
NAME_HINTS = {
    "attention": ("attention", "attn", "sdpa"),
    "norm": ("rmsnorm", "rms_norm", "layernorm", "layer_norm", "batchnorm", "batch_norm", "groupnorm", "norm"),
    "activation": ("mlp", "silu", "swiglu", "gelu", "intermediate", "feedforward", "ffn", "act"),
    "rope": ("rotary", "rope"),
}


class AttentionModel(BaseModel):
    """How a fused-attention candidate's time is projected: the batched matmuls' FLOPs at the
    efficiency fused attention reaches at this sequence length (TraceLens sdpa spec band)."""

    flops: float  # of the batched matmuls of every instance (QK^T and PV: 4 x B x H x Sq x Skv x D)
    compute_spec: str
    peak_tflops: float
    seq_len: int  # max(Sq, Skv) of the instance with the most FLOPs
    head_dim: int
    band_anchor: int
    efficiency_low_percent: float
    efficiency_high_percent: float
    fused_time_low_ms: float  # at the band's high efficiency
    fused_time_high_ms: float  # at the band's low efficiency

    def effective_percent(self, fused_ms: float) -> float:
        """The efficiency the whole group's fused time implies (each instance ran at its own band)."""
        return 100.0 * self.flops / (self.peak_tflops * 1e12 * fused_ms / 1000.0) if fused_ms > 0 else 0.0


class FusionCandidate(BaseModel):
    candidate_id: str
    name: str  # what the report calls it, e.g. "Unfused RMSNorm in Qwen2RMSNorm"
    pattern: str  # eager_attention | gemm_epilogue | rms_norm | layer_norm | rope | gated_activation | elementwise_chain | mixed
    source: str  # eager_attention | module | module_chain | op_subtree
    scope: str  # module class or op name the instances belong to
    module_chain: list[str]
    instance_count: int
    kernel_count: int  # kernels of one instance
    kernel_types: list[str]
    kernel_names: list[str]  # of the first instance, in launch order
    kernel_ops: list[str]  # the op of each of those kernels
    op_names: list[str]  # ops of the first instance, in launch order
    covered_ops: list[str]  # ops whose kernels a fused kernel removes (not the GEMMs it keeps)
    current_time_ms: float
    fused_time_ms: float  # current - mid savings
    savings_low_ms: float
    savings_mid_ms: float
    savings_high_ms: float
    percent_of_e2e: float
    impact_low: float
    impact_mid: float
    impact_high: float
    estimation: str  # measured | roofline | partial | flops
    attention_model: AttentionModel | None = None
    modeled_share: float  # share of chain time whose ops have bytes / FLOPs
    confidence: Confidence
    confidence_reason: str
    status: str  # estimated | rejected
    reject_reason: str | None = None
    example_op_ids: list[int]


class KernelFusionMetrics(BaseModel):
    platform: str
    peak_hbm_bw_gbps: float | None
    total_time_ms: float
    kernels_considered: int
    instance_count: int
    candidate_count: int  # candidates above the E2E threshold
    estimated_count: int
    min_percent_of_e2e: float
    max_kernels: int
    total_impact_mid: float
    candidates: list[FusionCandidate]
    high_confidence_ops: dict[str, str]


# ---- SQL --------------------------------------------------------------------------------------

# Each computation kernel with its unit (the nearest op above its launching op that has a perf
# model, else the launching op) and the innermost nn.Module call of its launch.
KERNELS_SQL = """
with params as (select ?::varchar as trace_id),
modeled_ops as (
    select op_perf_instances.op_id from op_perf_instances, params
    where op_perf_instances.trace_id = params.trace_id and not op_perf_instances.is_synthetic
      and op_perf_instances.op_id is not null
),
gpu_kernels as (
    select kernels.event_idx, kernels.name, kernels.ts_us, kernels.dur_us, kernels.kernel_type,
        kernels.cpu_op_id, kernels.launch_event_idx
    from kernels, params
    where kernels.trace_id = params.trace_id and kernels.is_linked and kernels.category = 'kernel'
      and kernels.gpu_bucket = 'computation'
),
kernel_units as (
    select gpu_kernels.event_idx, arg_min(cpu_op_ancestors.ancestor_op_id, cpu_op_ancestors.distance) as unit_op_id
    from gpu_kernels
    cross join params
    join cpu_op_ancestors on cpu_op_ancestors.trace_id = params.trace_id and cpu_op_ancestors.op_id = gpu_kernels.cpu_op_id
    join modeled_ops on modeled_ops.op_id = cpu_op_ancestors.ancestor_op_id
    group by gpu_kernels.event_idx
)
select
    coalesce(kernel_units.unit_op_id, gpu_kernels.cpu_op_id) as unit_op_id,
    gpu_kernels.event_idx, gpu_kernels.name, gpu_kernels.ts_us, gpu_kernels.dur_us, gpu_kernels.kernel_type,
    module_call_events.module_call_id
from gpu_kernels
cross join params
left join kernel_units on kernel_units.event_idx = gpu_kernels.event_idx
left join module_call_events
  on module_call_events.trace_id = params.trace_id and module_call_events.event_idx = gpu_kernels.launch_event_idx
order by gpu_kernels.ts_us, gpu_kernels.event_idx"""

OPS_SQL = """
with params as (select ?::varchar as trace_id)
select cpu_ops.op_id, cpu_ops.name, cpu_ops.parent_id, cpu_ops.module_chain, cpu_ops.pass,
    op_perf_instances.flops, op_perf_instances.bytes, op_perf_instances.compute_spec,
    op_perf_instances.input_dims
from cpu_ops
cross join params
left join op_perf_instances
  on op_perf_instances.trace_id = cpu_ops.trace_id and op_perf_instances.op_id = cpu_ops.op_id
 and not op_perf_instances.is_synthetic
where cpu_ops.trace_id = params.trace_id"""

MODULES_SQL = """
select module_call_id as module_id, module_class, parent_module_call_id as parent_module_id, depth, module_chain
from module_calls
where trace_id = ?"""

# The op ancestry (itself first) of the given ops.
ANCESTORS_SQL = """
select op_id, list(ancestor_op_id order by distance) as ancestor_op_ids
from cpu_op_ancestors
where trace_id = ? and op_id in (select unnest(?::bigint[]))
group by op_id"""

PLATFORM_SQL = """
select platforms.mem_bw_gbps, platform_peaks.compute_spec, platform_peaks.peak_tflops
from platforms left join platform_peaks on platform_peaks.platform = platforms.platform
where platforms.platform = ?"""

# Evidence: the candidate's chain instances (instance number, kernel event ids inlined) joined to
# `kernels`: the instance count, the kernels per instance and the chain time the finding prints.
EVIDENCE_SQL = """
with claimed(instance, event_idx) as (select unnest({instances}), unnest({event_ids}))
select count(distinct claimed.instance) as instance_count,
    count(*) / count(distinct claimed.instance) as kernels_per_instance,
    sum(kernels.dur_us) / 1000 as chain_time_ms
from claimed
join kernels on kernels.trace_id = {trace} and kernels.event_idx = claimed.event_idx"""


# ---- working structures -----------------------------------------------------------------------


@dataclass
class Unit:
    """The ops whose kernels a fused kernel would replace: one op_perf instance (or launching op)."""

    key: str
    op_id: int | None
    name: str
    module_id: int | None
    kernels: list[tuple] = field(default_factory=list)  # (event_idx, name, ts_us, dur_us, kernel_type)
    flops: float | None = None
    bytes: float | None = None
    compute_spec: str | None = None
    input_dims: str | None = None

    @property
    def ts(self) -> float:
        return self.kernels[0][2]

    @property
    def time_us(self) -> float:
        return sum(k[3] for k in self.kernels)

    @property
    def types(self) -> set[str]:
        return {k[4] for k in self.kernels}

    @property
    def is_matrix(self) -> bool:
        return bool(self.types & MATRIX_KERNEL_TYPES) or (self.compute_spec or "").startswith("matrix")

    @property
    def is_fused(self) -> bool:
        return bool(self.types & FUSED_KERNEL_TYPES)


@dataclass
class Instance:
    source: str
    scope: str
    units: list[Unit]
    module_chain: list[str]


def _inline(value: str | None) -> str:
    return "null" if value is None else "'" + value.replace("'", "''") + "'"



def _elements(dims) -> int:
    """Elements of one `Input Dims` slot: a shape, a list of shapes, or a scalar slot."""
    if not isinstance(dims, list) or not dims:
        return 0
    if all(isinstance(d, int) for d in dims):
        return math.prod(dims)
    return sum(_elements(d) for d in dims)


def _output_bytes(unit: Unit) -> float:
    """Bytes a unit writes, from its perf-model bytes: reductions write ~nothing worth counting;
    elementwise ops write a tensor the size of their largest input."""
    if not unit.bytes:
        return 0.0
    lowered = unit.name.lower()
    if "reduce" in unit.types or any(re.search(rf"\b{w}\b|_{w}\b|::{w}", lowered) for w in REDUCTION_OP_WORDS):
        return 0.0
    try:
        slots = [_elements(d) for d in json.loads(unit.input_dims or "[]")]
    except (json.JSONDecodeError, TypeError):
        slots = []
    slots = [s for s in slots if s > 0]
    if not slots:
        return unit.bytes / 2.0
    if unit.name in ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone"):
        return unit.bytes / 2.0
    largest = max(slots)
    return unit.bytes * largest / (sum(slots) + largest)


# ---- candidate formation ------------------------------------------------------------------------


class _Ops:
    """The trace's cpu ops by op id, held as columns (a dict per op cost more than the query);
    `get` builds one op's row when a candidate needs it."""

    def __init__(self, table: pa.Table) -> None:
        self._columns = {name: table.column(name).to_pylist() for name in table.column_names}
        self._row_of = {op_id: row for row, op_id in enumerate(self._columns["op_id"])}

    def get(self, op_id: int | None) -> dict | None:
        row = self._row_of.get(op_id)
        return None if row is None else {name: values[row] for name, values in self._columns.items()}


def _load_units(db: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[list[Unit], _Ops]:
    ops = _Ops(db.sql(OPS_SQL, params=[trace_id]).to_arrow_table())
    units: dict[str, Unit] = {}
    for op_id, event_idx, name, ts, dur, kernel_type, module_id in db.execute(KERNELS_SQL, [trace_id]).fetchall():
        key = f"op{op_id}" if op_id is not None else f"k{event_idx}"
        unit = units.get(key)
        if unit is None:
            op = ops.get(op_id) or {}
            unit = units[key] = Unit(
                key=key, op_id=op_id, name=op.get("name") or name, module_id=module_id,
                flops=op.get("flops"), bytes=op.get("bytes"), compute_spec=op.get("compute_spec"),
                input_dims=op.get("input_dims"))
        unit.kernels.append((event_idx, name, ts, dur, kernel_type or "unknown"))
    return sorted(units.values(), key=lambda u: (u.ts, u.key)), ops


def _module_chain(op: dict | None) -> list[str]:
    chain = list((op or {}).get("module_chain") or [])
    return [] if chain == ["root"] else chain


def _eager_attention(units: list[Unit], ops: _Ops, covered: set[str]) -> list[Instance]:
    """bmm -> (scale / mask) -> softmax -> (dropout) -> bmm issued in one module / under one parent."""

    def container(u: Unit):
        if u.module_id is not None:
            return ("module", u.module_id)
        return ("parent", (ops.get(u.op_id) or {}).get("parent_id"))

    sequences: dict = defaultdict(list)
    for u in units:
        sequences[container(u)].append(u)
    found: list[Instance] = []
    for seq in sequences.values():
        i = 0
        while i < len(seq):
            first = seq[i]
            if not (first.name in BMM_OPS and first.is_matrix) or first.key in covered:
                i += 1
                continue
            softmax_at = next((j for j in range(i + 1, min(len(seq), i + 2 + settings.ATTENTION_MAX_OPS_BEFORE_SOFTMAX))
                               if seq[j].name in SOFTMAX_OPS or "softmax" in seq[j].types), None)
            second_at = None if softmax_at is None else next(
                (j for j in range(softmax_at + 1, min(len(seq), softmax_at + 2 + settings.ATTENTION_MAX_OPS_AFTER_SOFTMAX))
                 if seq[j].name in BMM_OPS and seq[j].is_matrix), None)
            if second_at is None:
                i += 1
                continue
            window = seq[i:second_at + 1]
            if any(u.key in covered or u.is_fused for u in window):
                i += 1
                continue
            chain = _module_chain(ops.get(first.op_id))
            scope = chain[-1] if chain else (ops.get((ops.get(first.op_id) or {}).get("parent_id")) or {}).get("name", "top level")
            found.append(Instance("eager_attention", scope, window, chain))
            covered.update(u.key for u in window)
            i = second_at + 1
    return found


def _chains(pool: list[Unit]) -> list[list[Unit]]:
    """Runs of consecutive non-GEMM, not-yet-fused ops of at least two kernels."""
    runs, run = [], []
    for u in pool:
        if u.is_matrix or u.is_fused:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(u)
    if run:
        runs.append(run)
    return [r for r in runs if 2 <= sum(len(u.kernels) for u in r) <= settings.FUSION_MAX_KERNELS]


def _module_instances(units: list[Unit], modules: dict[int, dict], covered: set[str]) -> list[Instance]:
    """Innermost module call whose uncovered kernels form one contiguous run of 2..FUSION_MAX_KERNELS;
    a module with a longer run contributes that run's chains of non-GEMM ops instead. Kernels of a
    module that stay alone move up to the parent module, where they may join a run."""

    def parent_of(m: int) -> int | None:
        parent = modules.get(m, {}).get("parent_module_id")
        return parent if parent in modules else None

    direct: dict[int, list[Unit]] = defaultdict(list)
    subtree: dict[int, list[Unit]] = defaultdict(list)  # every unit under the module, covered or not
    for u in units:
        if u.module_id is None or u.module_id not in modules:
            continue
        if u.key not in covered:
            direct[u.module_id].append(u)
        m, seen = u.module_id, set()
        while m is not None and m not in seen:
            seen.add(m)
            subtree[m].append(u)
            m = parent_of(m)
    children: dict[int, list[int]] = defaultdict(list)
    for m in subtree:
        parent = parent_of(m)
        if parent is not None:
            children[parent].append(m)
    leftover: dict[int, list[Unit]] = {}
    found: list[Instance] = []
    for m in sorted(subtree, key=lambda x: (-modules[x]["depth"], x)):
        pool = list(direct.get(m, []))
        for child in children.get(m, []):
            pool.extend(leftover.pop(child, []))
        in_pool = {u.key for u in pool}
        segments: list[list[Unit]] = []
        previous_in_pool = False
        for u in sorted(subtree[m], key=lambda x: (x.ts, x.key)):
            if u.key in in_pool:
                if not previous_in_pool:
                    segments.append([])
                segments[-1].append(u)
            previous_in_pool = u.key in in_pool
        module_class, chain = modules[m]["module_class"], list(modules[m]["module_chain"])
        kept: list[Unit] = []
        for segment in segments:
            kernels = sum(len(u.kernels) for u in segment)
            if kernels < 2:
                kept.extend(segment)
            elif kernels <= settings.FUSION_MAX_KERNELS:
                found.append(Instance("module", module_class, segment, chain))
                covered.update(u.key for u in segment)
            else:
                for run in _chains(segment):
                    found.append(Instance("module_chain", module_class, run, chain))
                    covered.update(u.key for u in run)
        leftover[m] = kept
    return found


def _op_subtree_instances(db: duckdb.DuckDBPyConnection, trace_id: str, units: list[Unit], ops: _Ops,
                          covered: set[str]) -> list[Instance]:
    """Outermost cpu op whose subtree (over the remaining kernels) has 2..FUSION_MAX_KERNELS kernels."""
    remaining = [u for u in units if u.key not in covered and u.op_id is not None]
    ancestry = dict(db.execute(ANCESTORS_SQL, [trace_id, sorted({u.op_id for u in remaining})]).fetchall())
    counts: dict[int, int] = defaultdict(int)
    for u in remaining:
        for a in ancestry.get(u.op_id) or [u.op_id]:
            counts[a] += len(u.kernels)
    groups: dict[int, list[Unit]] = defaultdict(list)
    for u in remaining:
        fitting = [a for a in ancestry.get(u.op_id) or [u.op_id] if 2 <= counts[a] <= settings.FUSION_MAX_KERNELS]
        if fitting:
            groups[fitting[-1]].append(u)
    found = []
    for root, members in groups.items():
        op = ops.get(root) or {}
        chain = _module_chain(op)
        found.append(Instance("op_subtree", op["name"], sorted(members, key=lambda u: (u.ts, u.key)), chain))
        covered.update(u.key for u in members)
    return found


# ---- estimation ---------------------------------------------------------------------------------


@dataclass
class Estimate:
    pattern: str
    low_us: float = 0.0
    mid_us: float = 0.0
    high_us: float = 0.0
    removed: list[Unit] = field(default_factory=list)
    modeled_us: float = 0.0
    chain_us: float = 0.0
    measured: bool = True
    reject_reason: str | None = None
    flops: float = 0.0  # eager attention modelled from FLOPs: the batched matmuls' FLOPs ...
    compute_spec: str | None = None  # ... their compute spec ...
    seq_len: int = 0  # ... max(Sq, Skv), the head dim ...
    head_dim: int = 0
    fused_fast_us: float = 0.0  # ... and the fused kernel's time at the band's high / low efficiency
    fused_slow_us: float = 0.0


class _Platform:
    def __init__(self, bw_gbps: float | None, peaks: dict[str, float]):
        self.bw_gbps = bw_gbps
        self.peaks = peaks

    def compute_us(self, flops: float | None, spec: str | None) -> float:
        peak = self.peaks.get(spec or "") or self.peaks.get("vector_fp32")
        return (flops or 0.0) / (peak * 1e6) if peak else 0.0

    def memory_us(self, nbytes: float) -> float:
        return nbytes / (self.bw_gbps * 1e3) if self.bw_gbps else 0.0


def _chain_savings(run: list[Unit], platform: _Platform) -> tuple[float, float, float, float]:
    """(low, high, modeled_us, run_us) for fusing a run of non-GEMM ops into one kernel.

    high: the fused kernel at its roofline (intermediates never leave the chip, compute and memory
    overlapping at FUSION_OVERLAP_FACTOR); low: the fused kernel at today's achieved bandwidth,
    i.e. the time scaled by the bytes it no longer moves. Ops without bytes keep their time."""
    run_us = sum(u.time_us for u in run)
    modeled = [u for u in run if u.bytes]
    modeled_us = sum(u.time_us for u in modeled)
    if len(modeled) < 2 or not platform.bw_gbps:
        return 0.0, 0.0, modeled_us, run_us
    total_bytes = sum(u.bytes for u in modeled)
    intermediate = 2.0 * sum(_output_bytes(u) for u in modeled[:-1])
    fused_bytes = max(total_bytes - intermediate, max(u.bytes for u in modeled))
    if 1.0 - fused_bytes / total_bytes < settings.FUSION_MIN_BYTES_SAVED_SHARE:
        return 0.0, 0.0, modeled_us, run_us  # no intermediate tensor worth keeping on chip
    t_mem = platform.memory_us(fused_bytes)
    t_compute = sum(platform.compute_us(u.flops, u.compute_spec) for u in modeled)
    fused_roofline = max(t_mem, t_compute) + (1.0 - settings.FUSION_OVERLAP_FACTOR) * min(t_mem, t_compute)
    high = max(0.0, modeled_us - fused_roofline)
    low = max(0.0, modeled_us * (1.0 - fused_bytes / total_bytes))
    return min(low, high), high, modeled_us, run_us


# Input Dims slots of the scores' matmul operands (Q, K^T) by op: baddbmm passes its bias first;
# einsum's operands follow an equation the shapes alone do not explain (no shape: the fallback).
ATTENTION_OPERAND_SLOTS = {"aten::bmm": 0, "aten::matmul": 0, "aten::baddbmm": 1}


def _attention_shape(bmm: Unit) -> tuple[int, int]:
    """(max(Sq, Skv), head dim D) of the scores' batched matmul: operands [.., Sq, D] x [.., D, Skv]."""
    slot = ATTENTION_OPERAND_SLOTS.get(bmm.name)
    if slot is None:
        return 0, 0
    try:
        a, b = json.loads(bmm.input_dims or "[]")[slot:slot + 2]
        return max(int(a[-2]), int(b[-1])), int(a[-1])
    except (ValueError, TypeError, IndexError, json.JSONDecodeError):
        return 0, 0


def _fused_attention_us(flops: float, peak_tflops: float, efficiency_percent: float) -> float:
    return flops / (peak_tflops * 1e6 * efficiency_percent / 100.0)


def _attention_estimate(units: list[Unit], platform: _Platform) -> Estimate:
    """One fused attention kernel replaces the whole window. Its time is the batched matmuls'
    FLOPs at the efficiency fused attention reaches at this sequence length (the sdpa band, % of
    the platform's matrix peak): the saving is today's window time minus that. Without FLOPs (no
    perf model) only the non-matmul ops' measured time is credited."""
    matrix = [u for u in units if u.is_matrix]
    current = sum(u.time_us for u in units)
    spec = next((u.compute_spec for u in matrix if u.compute_spec), None)
    peak = platform.peaks.get(spec or "")
    seq_len, head_dim = _attention_shape(matrix[0]) if matrix else (0, 0)
    if not peak or not seq_len or any(not u.flops for u in matrix):
        return _attention_fallback(units)
    flops = sum(u.flops or 0.0 for u in matrix)
    _, eff_low, eff_high = expected_attention_band(seq_len, head_dim)
    fast, slow = _fused_attention_us(flops, peak, eff_high), _fused_attention_us(flops, peak, eff_low)
    return Estimate(
        "eager_attention",
        low_us=max(0.0, current - slow),
        mid_us=max(0.0, current - _fused_attention_us(flops, peak, (eff_low + eff_high) / 2.0)),
        high_us=max(0.0, current - fast),
        removed=list(units), measured=False, flops=flops, compute_spec=spec, seq_len=seq_len, head_dim=head_dim,
        fused_fast_us=fast, fused_slow_us=slow)


def _attention_fallback(units: list[Unit]) -> Estimate:
    """Without the matmuls' FLOPs: the non-matmul ops' measured time (scale, mask, softmax, dropout)
    x the quantified ladder; the matmuls' time is kept (their FLOPs remain in a fused kernel)."""
    rest = [u for u in units if not u.is_matrix]
    high = sum(u.time_us for u in rest)
    return Estimate("eager_attention", settings.TARGET_LOW * high, settings.TARGET_MID * high, high, rest)


def _attention_model(estimates: list[Estimate], platform: _Platform) -> AttentionModel | None:
    """The group's fused-attention projection: each instance at the band of its own sequence
    length; the largest-FLOPs instance's band is the one quoted."""
    if not estimates or any(not e.flops for e in estimates):
        return None
    main = max(estimates, key=lambda e: e.flops)
    anchor, eff_low, eff_high = expected_attention_band(main.seq_len, main.head_dim)
    return AttentionModel(
        flops=sum(e.flops for e in estimates), compute_spec=main.compute_spec or "",
        peak_tflops=platform.peaks[main.compute_spec or ""], seq_len=main.seq_len, head_dim=main.head_dim,
        band_anchor=anchor, efficiency_low_percent=eff_low, efficiency_high_percent=eff_high,
        fused_time_low_ms=round(sum(e.fused_fast_us for e in estimates) / 1000.0, 4),
        fused_time_high_ms=round(sum(e.fused_slow_us for e in estimates) / 1000.0, 4))


def _composition(instance: Instance) -> str:
    names = " ".join(u.name for u in instance.units).lower()
    if instance.source == "eager_attention":
        return "eager_attention"
    has_matrix = any(u.is_matrix for u in instance.units)
    if "rsqrt" in names and ("mean" in names or "pow" in names or "var" in names):
        return "layer_norm" if "sub" in names else "rms_norm"
    if "neg" in names and "cat" in names:
        return "rope"
    bases = {u.name.split("::")[-1].strip("_") for u in instance.units}
    # separate activation and multiply ops; an op that already is both (`silu_and_mul`) is fused
    if bases & {"silu", "gelu", "sigmoid", "gelu_tanh"} and bases & {"mul"}:
        return "gated_activation"
    if has_matrix:
        return "gemm_epilogue"
    return "elementwise_chain"


def _estimate(instance: Instance, platform: _Platform) -> Estimate:
    units = instance.units
    if instance.source == "eager_attention":
        return _attention_estimate(units, platform)
    eligible = [u for u in units if not u.is_fused]
    if not any(not u.is_matrix for u in eligible):
        return Estimate(_composition(instance), reject_reason="only GEMM / already-fused kernels: nothing to fuse")
    matrix = [u for u in eligible if u.is_matrix]
    if matrix and all("norm" in u.types for u in eligible if not u.is_matrix):
        return Estimate(_composition(instance), reject_reason="GEMM followed by normalization only: no epilogue fusion")
    est = Estimate(_composition(instance))
    segments: list[tuple[Unit | None, list[Unit]]] = []
    head: Unit | None = None
    run: list[Unit] = []
    for u in units:
        if u.is_matrix or u.is_fused:
            segments.append((head, run))
            head, run = (u if u.is_matrix else None), []
        else:
            run.append(u)
    segments.append((head, run))
    epilogue_parts = chain_parts = False
    for head, run in segments:
        if not run:
            continue
        if head is not None and len(run) <= settings.EPILOGUE_MAX_OPS and all(u.types <= EPILOGUE_KERNEL_TYPES for u in run):
            high = sum(u.time_us for u in run)
            est.low_us += settings.TARGET_LOW * high
            est.mid_us += settings.TARGET_MID * high
            est.high_us += high
            est.removed.extend(run)
            epilogue_parts = True
            continue
        low, high, modeled_us, run_us = _chain_savings(run, platform)
        est.modeled_us += modeled_us
        est.chain_us += run_us
        if high > 0:
            est.low_us += low
            est.mid_us += (low + high) / 2.0
            est.high_us += high
            est.removed.extend(u for u in run if u.bytes)
            chain_parts = True
    if chain_parts:
        est.measured = False
    if est.pattern == "gemm_epilogue" and chain_parts and not epilogue_parts:
        est.pattern = "elementwise_chain"
    if est.high_us <= 0:
        est.reject_reason = ("no modeled saving: the ops lack bytes / FLOPs or pass no intermediate tensor "
                             "between them")
    return est


PATTERN_TITLES = {
    "eager_attention": "Unfused attention (batched matmul + softmax + batched matmul)",
    "gemm_epilogue": "GEMM epilogue (elementwise ops after a GEMM)",
    "rms_norm": "Unfused RMSNorm",
    "layer_norm": "Unfused LayerNorm",
    "rope": "Unfused rotary embedding",
    "gated_activation": "Unfused gated activation",
    "elementwise_chain": "Elementwise chain",
}
PATTERN_ACTIONS = {
    "eager_attention": ("Replace the explicit matmul-softmax-matmul with the framework's fused scaled-dot-product "
                        "attention, so the score matrix is never written to memory."),
    "gemm_epilogue": ("Fuse the elementwise ops into the GEMM epilogue (a vendor GEMM library call with a "
                      "bias/activation epilogue) so the GEMM output is written once."),
    "rms_norm": "Use a single fused RMSNorm kernel instead of the separate power, mean, rsqrt and scale ops.",
    "layer_norm": "Use a single fused LayerNorm kernel instead of the separate statistics and scale ops.",
    "rope": "Apply the rotary embedding with one fused kernel instead of separate slice, negate, concatenate and multiply ops.",
    "gated_activation": "Compute the activation and the gating multiply in one fused kernel (or in the GEMM epilogue).",
    "elementwise_chain": ("Fuse the chain of elementwise ops into one kernel with graph-level compilation, so "
                          "intermediate tensors stay on chip."),
}


PATTERN_FAMILIES = {"eager_attention": {"attention"}, "rms_norm": {"norm"}, "layer_norm": {"norm"},
                   "rope": {"rope", "attention"}, "gated_activation": {"activation"},
                   "gemm_epilogue": {"activation", "attention", None}}


def _confidence(instance: Instance, est: Estimate, verdicts: dict[str, str]) -> tuple[Confidence, str]:
    """high needs an explicit op pattern, a module name that does not contradict it and (for
    roofline projections) perf models for most of the chain; trace timing problems lower it."""
    scope = instance.scope.lower()
    hint = next((k for k, words in NAME_HINTS.items() if any(w in scope for w in words)), None)
    pattern = est.pattern
    modeled_share = est.modeled_us / est.chain_us if est.chain_us else 1.0
    reasons = []
    families = PATTERN_FAMILIES.get(pattern)
    if families is not None:
        agree = hint is None or hint in families
        level: Confidence = "high" if agree and modeled_share >= settings.FUSION_MODELED_SHARE_HIGH else "medium"
        reasons.append(f"op composition matches {pattern.replace('_', ' ')}"
                       + ("" if hint is None else f"; module name suggests {hint}" + ("" if agree else " (disagrees)")))
        if est.measured:
            reasons.append("saving is measured kernel time")
    else:
        level = "medium" if modeled_share >= settings.FUSION_MODELED_SHARE_HIGH else "low"
        reasons.append("generic chain of elementwise ops, no named pattern")
    if est.chain_us:
        reasons.append(f"{100 * modeled_share:.0f} % of chain time has a perf model")
    warned = [c for c in FUSION_QUALITY_CHECKS if verdicts.get(c) in ("warn", "fail")]
    for _ in warned:
        level = {"high": "medium", "medium": "low", "low": "low"}[level]
    if warned:
        reasons.append("lowered by trace-quality warnings: " + ", ".join(warned))
    return level, "; ".join(reasons)


def _signature(instance: Instance) -> tuple:
    return (instance.source, instance.scope, tuple(k[4] for u in instance.units for k in u.kernels))


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Fusion candidates of one trace, their projected fused time and the findings worth acting on."""
    if ctx.e2e_time_ms <= 0:
        return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="NO_DATA",
                           error="the trace has no linked GPU time")
    units, ops = _load_units(db, ctx.trace_id)
    platform_rows = query_rows(db, PLATFORM_SQL, [ctx.platform])
    platform = _Platform(
        float(platform_rows[0]["mem_bw_gbps"]) if platform_rows and platform_rows[0]["mem_bw_gbps"] else None,
        {r["compute_spec"]: float(r["peak_tflops"]) for r in platform_rows if r["compute_spec"] and r["peak_tflops"]})
    modules = {r["module_id"]: r for r in query_rows(db, MODULES_SQL, [ctx.trace_id])}

    covered: set[str] = set()
    instances = _eager_attention(units, ops, covered)
    instances += _module_instances(units, modules, covered)
    instances += _op_subtree_instances(db, ctx.trace_id, units, ops, covered)
    instances = [i for i in instances if 2 <= sum(len(u.kernels) for u in i.units) <= settings.FUSION_MAX_KERNELS]

    groups: dict[tuple, list[Instance]] = defaultdict(list)
    for instance in instances:
        groups[_signature(instance)].append(instance)

    op_time: dict[str, float] = defaultdict(float)
    for u in units:
        op_time[u.name] += u.time_us

    candidates: list[FusionCandidate] = []
    removed_by_candidate: dict[str, dict[str, float]] = {}
    members_by_candidate: dict[str, list[Instance]] = {}
    for (source, scope, types), members in groups.items():
        current_us = sum(u.time_us for i in members for u in i.units)
        percent = 100.0 * current_us / 1000.0 / ctx.e2e_time_ms
        if percent < settings.FUSION_MIN_PERCENT_OF_E2E:
            continue
        estimates = [_estimate(i, platform) for i in members]
        if source == "eager_attention" and any(not e.flops for e in estimates):
            estimates = [_attention_fallback(i.units) for i in members]  # one method for the whole group
        first, est0 = members[0], estimates[0]
        low = sum(e.low_us for e in estimates)
        mid = sum(e.mid_us for e in estimates)
        high = sum(e.high_us for e in estimates)
        modeled = sum(e.modeled_us for e in estimates)
        chain = sum(e.chain_us for e in estimates)
        pattern = est0.pattern
        if pattern == "rope" and not ctx.facts.has_rotary:
            pattern = "elementwise_chain"  # rotate-half-like ops, but no rotary embedding in the trace
        merged = Estimate(pattern, low, mid, high, modeled_us=modeled, chain_us=chain,
                          measured=all(e.measured for e in estimates),
                          reject_reason=est0.reject_reason if high <= 0 else None)
        confidence, reason = _confidence(first, merged, ctx.quality_verdicts)
        attention = _attention_model(estimates, platform) if pattern == "eager_attention" else None
        removed_names: dict[str, float] = defaultdict(float)
        for e in estimates:
            for u in e.removed:
                removed_names[u.name] += u.time_us
        candidate_id = f"{len(candidates) + 1:02d}"
        if merged.reject_reason:
            label = f"Kernel group ({len(types)} kernels)"
        elif pattern == "elementwise_chain":
            label = f"Elementwise chain ({len(types)} kernels)"
        else:
            label = PATTERN_TITLES[pattern]
        candidates.append(FusionCandidate(
            candidate_id=candidate_id,
            name=f"{label} in {scope}",
            pattern=pattern, source=source, scope=scope, module_chain=first.module_chain,
            instance_count=len(members), kernel_count=len(types), kernel_types=list(types),
            kernel_names=[k[1] for u in first.units for k in u.kernels],
            kernel_ops=[u.name for u in first.units for _ in u.kernels],
            op_names=[u.name for u in first.units],
            covered_ops=sorted(removed_names),
            current_time_ms=current_us / 1000.0,  # unrounded: the sum of the claimed kernels
            fused_time_ms=round((current_us - mid) / 1000.0, 4),
            savings_low_ms=round(low / 1000.0, 4), savings_mid_ms=round(mid / 1000.0, 4),
            savings_high_ms=round(high / 1000.0, 4),
            percent_of_e2e=round(percent, 3),
            impact_low=round(100.0 * low / 1000.0 / ctx.e2e_time_ms, 3),
            impact_mid=round(100.0 * mid / 1000.0 / ctx.e2e_time_ms, 3),
            impact_high=round(100.0 * high / 1000.0 / ctx.e2e_time_ms, 3),
            estimation=("flops" if attention is not None else "measured" if merged.measured
                        else "roofline" if chain and modeled >= chain * 0.999 else "partial"),
            attention_model=attention,
            modeled_share=round(modeled / chain, 3) if chain else 1.0,
            confidence=confidence, confidence_reason=reason,
            status="rejected" if merged.reject_reason else "estimated",
            reject_reason=merged.reject_reason,
            example_op_ids=[u.op_id for u in first.units if u.op_id is not None][:FUSION_MAX_EXAMPLE_OPS],
        ))
        removed_by_candidate[candidate_id] = removed_names
        members_by_candidate[candidate_id] = members
    order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].impact_mid, -candidates[i].current_time_ms,
                                                           candidates[i].name))
    removed_by_candidate = {f"{rank:02d}": removed_by_candidate[candidates[i].candidate_id]
                            for rank, i in enumerate(order, start=1)}
    members_by_candidate = {f"{rank:02d}": members_by_candidate[candidates[i].candidate_id]
                            for rank, i in enumerate(order, start=1)}
    candidates = [candidates[i].model_copy(update={"candidate_id": f"{rank:02d}"}) for rank, i in enumerate(order, start=1)]

    high_confidence_ops: dict[str, str] = {}
    covered_time: dict[str, float] = defaultdict(float)
    owner: dict[str, tuple[float, str]] = {}
    for c in candidates:
        if c.confidence != "high" or c.status != "estimated":
            continue
        for name, t in removed_by_candidate[c.candidate_id].items():
            covered_time[name] += t
            if t > owner.get(name, (0.0, ""))[0]:
                owner[name] = (t, c.name)
    for name, t in covered_time.items():
        if op_time[name] > 0 and t / op_time[name] >= settings.FUSION_FLAG_OP_TIME_SHARE_MIN:
            high_confidence_ops[name] = owner[name][1]

    reported = [c for c in candidates if c.status == "estimated" and c.impact_mid >= settings.MIN_PITEM_IMPACT_SCORE]
    findings: list[Finding] = []
    for c in reported[:settings.MAX_FUSION_FINDINGS]:
        finding = _finding(c, members_by_candidate[c.candidate_id], ctx)
        if any(f.finding_id == finding.finding_id for f in findings):
            finding = finding.model_copy(update={"finding_id": f"{finding.finding_id}-{c.candidate_id}"})
        findings.append(finding)
    metrics = KernelFusionMetrics(
        platform=ctx.platform, peak_hbm_bw_gbps=platform.bw_gbps, total_time_ms=round(ctx.e2e_time_ms, 4),
        kernels_considered=sum(len(u.kernels) for u in units), instance_count=len(instances),
        candidate_count=len(candidates), estimated_count=sum(c.status == "estimated" for c in candidates),
        min_percent_of_e2e=settings.FUSION_MIN_PERCENT_OF_E2E, max_kernels=settings.FUSION_MAX_KERNELS,
        total_impact_mid=round(sum(f.impact_score or 0.0 for f in findings), 3),
        candidates=candidates, high_confidence_ops=high_confidence_ops)
    status = "OK" if units else "NO_DATA"
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status=status,
                       error=None if units else "no computation kernels linked to host ops",
                       metrics=metrics.model_dump(mode="json"), findings=findings)


def _claimed_kernels(members: list[Instance]) -> dict[int, float]:
    """The GPU events of the candidate's chain instances: event_idx -> dur_us."""
    return {k[0]: k[3] for instance in members for u in instance.units for k in u.kernels}


def _evidence_sql(trace_id: str, members: list[Instance]) -> str:
    instances = [n for n, instance in enumerate(members, start=1) for u in instance.units for _ in u.kernels]
    event_ids = [k[0] for instance in members for u in instance.units for k in u.kernels]
    return EVIDENCE_SQL.format(trace=_inline(trace_id), instances=instances, event_ids=event_ids).strip()


def _fused_time_sentence(c: FusionCandidate) -> str:
    model = c.attention_model
    if model is None:
        return f"one fused kernel would take about {c.fused_time_ms:.3f} ms."
    return (f"one fused attention kernel would take about {model.fused_time_low_ms:.3f}-{model.fused_time_high_ms:.3f} ms: "
            f"{model.flops / 1e12:.2f} TFLOP of attention at {model.effective_percent(model.fused_time_high_ms):.0f}-"
            f"{model.effective_percent(model.fused_time_low_ms):.0f} % of the {model.peak_tflops:g} TFLOPS "
            f"{model.compute_spec} peak.")


def _attention_method(model: AttentionModel | None) -> str:
    if model is None:
        return ""
    return (f"fused attention time = FLOPs of the batched matmuls (QK^T and PV, 4 x B x H x Sq x Skv x D) / "
            f"({model.compute_spec} peak x attainable efficiency) = {model.flops / 1e12:.3f} TFLOP / "
            f"({model.peak_tflops:g} TFLOPS x {model.effective_percent(model.fused_time_high_ms):.1f}-"
            f"{model.effective_percent(model.fused_time_low_ms):.1f} %) = "
            f"{model.fused_time_low_ms:.3f}-{model.fused_time_high_ms:.3f} ms (each instance at the efficiency band "
            f"fused attention reaches at its shape; the largest, N = {model.seq_len} and head dim {model.head_dim}: "
            f"{model.efficiency_low_percent:.0f}-{model.efficiency_high_percent:.0f} %, the TraceLens sdpa band for the "
            f"nearest anchor N = {model.band_anchor} capped by FlashAttention-2 to FlashAttention-3 forward at that "
            f"head dim, FlashAttention-3 paper); saving = the window's measured time - the fused time (low at "
            f"the band's low efficiency, mid at its middle)")


def _finding(c: FusionCandidate, members: list[Instance], ctx: AnalysisContext) -> Finding:
    slug = re.sub(r"[^a-z0-9]+", "-", f"{c.pattern}-{c.scope}".lower()).strip("-")
    evidence_sql = _evidence_sql(ctx.trace_id, members)
    kernel_table = "\n".join(
        ["| # | Op | Kernel | Type |", "|---|---|---|---|"]
        + [f"| {i} | `{op}` | `{(k[:60] + '...') if len(k) > 60 else k}` | {t} |"
           for i, (op, k, t) in enumerate(zip(c.kernel_ops, c.kernel_names, c.kernel_types), start=1)])
    method = {
        "measured": (f"the removed ops' measured kernel time x {settings.TARGET_LOW}/{settings.TARGET_MID}/"
                     f"{settings.TARGET_HIGH} (low/mid/high)"),
        "roofline": ("low = time x share of bytes no longer moved (fused kernel at today's bandwidth); high = time - "
                     "fused roofline time (bytes after removing intermediates / HBM bandwidth, overlapped with FLOPs at "
                     f"{settings.FUSION_OVERLAP_FACTOR}); mid = their mean"),
        "partial": ("as the roofline method, over the ops with a perf model only; ops without bytes keep their "
                    "measured time"),
        "flops": _attention_method(c.attention_model),
    }[c.estimation]
    # every estimation is a model: partial projects only the modelled ops (the rest keep their time)
    estimate_method = "quantified"
    action = PATTERN_ACTIONS[c.pattern]
    if ctx.facts.is_compiled and c.pattern == "elementwise_chain":
        action = ("The model is already compiled, yet these ops run as separate kernels: find the graph break that "
                  "keeps them out of the compiled region (torch._dynamo.explain) or fuse them by hand.")
    return Finding(
        finding_id=f"{AGENT_NAME}:{slug}", agent=AGENT_NAME, tier="system", category=AGENT_NAME,
        title=c.name,
        insight=(f"{c.instance_count} instances of {c.kernel_count} kernels in {c.scope} take {c.current_time_ms:.3f} ms "
                 f"({c.percent_of_e2e:.1f} % of E2E); " + _fused_time_sentence(c)),
        action=action,
        impact_low=c.impact_low, impact_score=c.impact_mid, impact_high=c.impact_high,
        recoverable_ms=round(c.impact_mid * ctx.e2e_time_ms / 100.0, 4),
        estimate_method=estimate_method, confidence=c.confidence,
        evidence={"candidate_id": c.candidate_id, "instance_count": c.instance_count, "kernel_count": c.kernel_count,
                  "current_time_ms": c.current_time_ms, "fused_time_ms": c.fused_time_ms,
                  "savings_ms": [c.savings_low_ms, c.savings_mid_ms, c.savings_high_ms],
                  "covered_ops": c.covered_ops, "estimation": c.estimation, "modeled_share": c.modeled_share},
        evidence_sql=evidence_sql,
        claimed_kernels=_claimed_kernels(members),
        operations=c.covered_ops,
        details=(
            f"**Identification:** {c.instance_count} calls of `{c.scope}`"
            + (f" (module chain {' > '.join(c.module_chain[-3:])})" if c.module_chain else "")
            + f" each launch {c.kernel_count} kernels: {', '.join(f'`{o}`' for o in c.op_names[:8])}"
            + ("..." if len(c.op_names) > 8 else "")
            + f" (source: `kernel_fusion_metrics.json` -> `candidates`, candidate_id `{c.candidate_id}`).\n\n"
            f"**Data:**\n\n{kernel_table}\n\n"
            f"**Reasoning for Slowdown:** each separate kernel writes its result to memory and the next one reads it "
            f"back; for short memory-bound kernels that round trip and the per-kernel launch dominate. "
            f"Confidence {c.confidence}: {c.confidence_reason}.\n\n"
            f"**Resolution:** {action}\n\n"
            f"**Impact estimate:** {method}: saves {c.savings_low_ms:.3f}-{c.savings_high_ms:.3f} ms = "
            f"{c.impact_low:.2f}-{c.impact_high:.2f} % of E2E (mid {c.impact_mid:.2f} %)."),
    )
