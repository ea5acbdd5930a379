"""Convolution agent: forward and backward convolutions. Beyond the roofline gap it measures the
layout-transpose kernels the convolution library runs inside each conv op (channels-first
tensors fed to channels-last kernels), which TraceLens approximated by op names."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import compute, settings
from tracelake.analyzers.compute import Advice, AgentData, ComputeMetrics, OpGroup, OpRecord
from tracelake.analyzers.contracts import AdviceText, AgentResult, AnalysisContext
from tracelake.analyzers.finding_text import render_advice

AGENT_NAME = "convolution"
TIER = "compute"
DISPLAY_NAME = "Convolution"


class ConvolutionFacts(BaseModel):
    kind_counts: dict[str, int]
    forward_time_ms: float
    backward_time_ms: float
    channels_last_count: int
    channels_first_count: int
    layout_transform_time_ms: float  # transpose / layout-conversion kernels inside the conv ops
    transpose_overhead_percent: float  # layout_transform_time_ms / conv kernel time x 100
    depthwise_count: int
    transposed_conv_count: int  # deconvolutions (conv_transpose)
    peak_matrix_bf16_tflops: float | None


class ConvolutionMetrics(ComputeMetrics):
    category_specific: ConvolutionFacts


def _filter_shape(op: OpRecord) -> list[int] | None:
    params = op.perf_params or {}
    shape = params.get("filter_shape")
    if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
        return shape
    dims = compute.parse_json_list(op.input_dims)
    index = 2 if op.op_category == "CONV_bwd" else 1
    if len(dims) > index and isinstance(dims[index], list) and all(isinstance(d, int) for d in dims[index]):
        return dims[index]
    return None


def _input_channels(op: OpRecord) -> int | None:
    params = op.perf_params or {}
    shape = params.get("input_shape")
    if isinstance(shape, list) and len(shape) >= 2 and isinstance(shape[1], int):
        return shape[1]
    return None


def classify(op: OpRecord) -> str:
    params = op.perf_params or {}
    if params.get("transposed") is True or "transpose" in op.name.lower():
        return "transposed"
    filt = _filter_shape(op)
    if not filt or len(filt) < 3:
        return "other"
    channels = _input_channels(op)
    if len(filt) >= 4 and filt[1] == 1 and channels and channels > 1:
        return "depthwise"
    spatial = filt[2:]
    if len(spatial) == 1:
        return "1d"
    if len(spatial) == 3:
        return "3d"
    if all(s == 1 for s in spatial):
        return "1x1"
    if all(s == 3 for s in spatial):
        return "3x3"
    return "kxk"


def transpose_percent(ops: list[OpRecord]) -> float:
    kernel_us = sum(op.time_ms for op in ops) * 1000.0
    layout_us = sum(op.layout_kernel_time_us for op in ops)
    return 100.0 * layout_us / kernel_us if kernel_us > 0 else 0.0


def advice_text(group: OpGroup, data: AgentData) -> AdviceText:
    """Which convolution advice applies to the group (a row of analyzers/advice/convolution.toml), with its values."""
    dominant = group.dominant
    kind = dominant.kind
    overhead = transpose_percent(group.members)
    nchw = sum(1 for op in group.members if compute.tensor_layout(op) == "channels_first")
    layout = {"transpose_percent": overhead, "nchw_count": nchw, "member_count": len(group.members)}
    if kind == "depthwise":
        return AdviceText(agent=AGENT_NAME, fact="depthwise", values=layout)
    if group.estimate_method == "heuristic":
        return AdviceText(agent=AGENT_NAME, fact="unmodelled",
                          values={**layout, "generic": compute.generic_advice(group, "these convolutions")})
    return AdviceText(agent=AGENT_NAME, fact="modelled", values={
        **layout, "kind": kind, "bound": group.bound, "efficiency": group.weighted_efficiency or 0.0,
        "expected_percent": settings.EXPECTED_EFFICIENCY_PERCENT.get(kind),
        "channels_last": overhead >= settings.TRANSPOSE_OVERHEAD_MODERATE_PERCENT or nchw > 0})


def advise(group: OpGroup, data: AgentData) -> Advice:
    return render_advice(advice_text(group, data))


def facts(data: AgentData) -> ConvolutionFacts:
    ops = data.ops
    counts, _ = compute.kind_totals(ops)
    return ConvolutionFacts(
        kind_counts=counts,
        forward_time_ms=sum(op.time_ms for op in ops if op.op_category != "CONV_bwd"),
        backward_time_ms=sum(op.time_ms for op in ops if op.op_category == "CONV_bwd"),
        channels_last_count=sum(1 for op in ops if compute.tensor_layout(op) == "channels_last"),
        channels_first_count=sum(1 for op in ops if compute.tensor_layout(op) == "channels_first"),
        layout_transform_time_ms=sum(op.layout_kernel_time_us for op in ops) / 1000.0,
        transpose_overhead_percent=transpose_percent(ops),
        depthwise_count=counts.get("depthwise", 0),
        transposed_conv_count=counts.get("transposed", 0),
        peak_matrix_bf16_tflops=data.platform_peaks.get("matrix_bf16"),
    )


def attainable(op: OpRecord) -> float:
    """The share of peak convolutions of this kernel shape reach (TraceLens convolution spec)."""
    return settings.EXPECTED_EFFICIENCY_PERCENT.get(op.kind, settings.ATTAINABLE_ROOFLINE_PERCENT)


AGENT = compute.ComputeAgent(
    name=AGENT_NAME, display_name=DISPLAY_NAME, noun="convolution", classify=classify, advise=advise,
    attainable=attainable,
)


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Convolution findings: roofline gap, layout-transpose overhead, channels-last and autotuning."""
    return compute.run_agent(db, ctx, AGENT, ConvolutionMetrics, facts)
