"""What fusing an instance would save. Each instance is split at its GEMM/convolution kernels; a
GEMM followed by at most two elementwise ops is a GEMM epilogue (those ops disappear into the
GEMM); any other run of non-GEMM ops is a fusion chain whose fused time is projected from
op_perf_instances bytes and FLOPs: intermediate tensors no longer round-trip memory. Eager
attention is projected from the batched matmuls' FLOPs at the efficiency fused attention reaches.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.common import expected_attention_band
from tracelake.analyzers.fusion_units import Instance, Unit

EPILOGUE_KERNEL_TYPES = {"elementwise"}
REDUCTION_OP_WORDS = ("mean", "sum", "var", "std", "amax", "amin", "max", "min", "norm", "softmax", "argmax", "all", "any")
COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone")
# Input Dims slots of the scores' matmul operands (Q, K^T) by op: baddbmm passes its bias first;
# einsum's operands follow an equation the shapes alone do not explain (no shape: the fallback).
ATTENTION_OPERAND_SLOTS = {"aten::bmm": 0, "aten::matmul": 0, "aten::baddbmm": 1}

BANDWIDTH_SQL = "select mem_bw_gbps from platforms where platform = ?"
PEAKS_SQL = "select compute_spec, peak_tflops from platform_peaks where platform = ?"


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


class Platform:
    """The trace platform's HBM bandwidth and compute peaks (seeds)."""

    def __init__(self, bw_gbps: float | None, peaks: dict[str, float]):
        self.bw_gbps = bw_gbps
        self.peaks = peaks

    @classmethod
    def load(cls, db: duckdb.DuckDBPyConnection, platform: str) -> Platform:
        bandwidth = db.execute(BANDWIDTH_SQL, [platform]).fetchone()
        peaks = db.execute(PEAKS_SQL, [platform]).fetchall() if bandwidth else []
        return cls(float(bandwidth[0]) if bandwidth and bandwidth[0] else None,
                   {spec: float(peak) for spec, peak in peaks if spec and peak})

    def compute_us(self, flops: float | None, spec: str | None) -> float:
        peak = self.peaks.get(spec or "") or self.peaks.get("vector_fp32")
        return (flops or 0.0) / (peak * 1e6) if peak else 0.0

    def memory_us(self, nbytes: float) -> float:
        return nbytes / (self.bw_gbps * 1e3) if self.bw_gbps else 0.0


def _elements(dims: Any) -> int:
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
    if unit.name in COPY_OPS:
        return unit.bytes / 2.0
    largest = max(slots)
    return unit.bytes * largest / (sum(slots) + largest)


def _chain_savings(run: list[Unit], platform: Platform) -> tuple[float, float, float, float]:
    """(low, high, modeled_us, run_us) for fusing a run of non-GEMM ops into one kernel.

    high: the fused kernel at its roofline (intermediates never leave the chip, compute and memory
    overlapping at FUSION_OVERLAP_FACTOR); low: the fused kernel at today's achieved bandwidth,
    i.e. the time scaled by the bytes it no longer moves. Ops without bytes keep their time."""
    run_us = sum(u.time_us for u in run)
    modeled = [u for u in run if u.bytes]
    modeled_us = sum(u.time_us for u in modeled)
    if len(modeled) < 2 or not platform.bw_gbps:
        return 0.0, 0.0, modeled_us, run_us
    total_bytes = sum(u.bytes or 0.0 for u in modeled)
    intermediate = 2.0 * sum(_output_bytes(u) for u in modeled[:-1])
    fused_bytes = max(total_bytes - intermediate, max(u.bytes or 0.0 for u in modeled))
    if 1.0 - fused_bytes / total_bytes < settings.FUSION_MIN_BYTES_SAVED_SHARE:
        return 0.0, 0.0, modeled_us, run_us  # no intermediate tensor worth keeping on chip
    t_mem = platform.memory_us(fused_bytes)
    t_compute = sum(platform.compute_us(u.flops, u.compute_spec) for u in modeled)
    fused_roofline = max(t_mem, t_compute) + (1.0 - settings.FUSION_OVERLAP_FACTOR) * min(t_mem, t_compute)
    high = max(0.0, modeled_us - fused_roofline)
    low = max(0.0, modeled_us * (1.0 - fused_bytes / total_bytes))
    return min(low, high), high, modeled_us, run_us


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


def fused_attention_us(flops: float, peak_tflops: float, efficiency_percent: float) -> float:
    return flops / (peak_tflops * 1e6 * efficiency_percent / 100.0)


def _attention_estimate(units: list[Unit], platform: Platform) -> Estimate:
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
        return attention_fallback(units)
    flops = sum(u.flops or 0.0 for u in matrix)
    _, eff_low, eff_high = expected_attention_band(seq_len, head_dim)
    fast, slow = fused_attention_us(flops, peak, eff_high), fused_attention_us(flops, peak, eff_low)
    return Estimate(
        "eager_attention",
        low_us=max(0.0, current - slow),
        mid_us=max(0.0, current - fused_attention_us(flops, peak, (eff_low + eff_high) / 2.0)),
        high_us=max(0.0, current - fast),
        removed=list(units), measured=False, flops=flops, compute_spec=spec, seq_len=seq_len, head_dim=head_dim,
        fused_fast_us=fast, fused_slow_us=slow)


def attention_fallback(units: list[Unit]) -> Estimate:
    """Without the matmuls' FLOPs: the non-matmul ops' measured time (scale, mask, softmax, dropout)
    x the quantified ladder; the matmuls' time is kept (their FLOPs remain in a fused kernel)."""
    rest = [u for u in units if not u.is_matrix]
    high = sum(u.time_us for u in rest)
    return Estimate("eager_attention", settings.TARGET_LOW * high, settings.TARGET_MID * high, high, rest)


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


def _segments(units: list[Unit]) -> list[tuple[Unit | None, list[Unit]]]:
    """The instance split at its GEMM / fused kernels: (the GEMM before the run or None, the run)."""
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
    return segments


def estimate(instance: Instance, platform: Platform) -> Estimate:
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
    epilogue_parts = chain_parts = False
    for head, run in _segments(units):
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
