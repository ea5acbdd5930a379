"""Text helpers of the compute agents: an op's arguments and shape as TraceLens prints them, JSON
columns of op_perf parsed leniently, clipping and number formatting."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tracelake.analyzers.settings import SAME_SPEED_RATIO


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


def is_shape(value: Any) -> bool:
    """A tensor shape: a list of ints."""
    return isinstance(value, list) and all(isinstance(d, int) for d in value)


def format_args(input_dims: str, input_type: str) -> str:
    """`(d1,d2) dtype` per tensor input, scalars and empty slots dropped (TraceLens format_args)."""
    parts = []
    types = parse_json_list(input_type)
    for i, dims in enumerate(parse_json_list(input_dims)):
        dtype = dtype_name(types[i]) if i < len(types) else ""
        if is_shape(dims) and dims:
            inner = ",".join(str(d) for d in dims) + ("," if len(dims) == 1 else "")
            parts.append(f"({inner}) {dtype}".strip())
        elif isinstance(dims, list) and dims and all(is_shape(d) for d in dims):
            tensors = ", ".join("(" + ",".join(str(x) for x in d) + ")" for d in dims if d)
            parts.append(f"[{tensors}] {dtype}".strip())
    return ", ".join(parts)


def compact_shape(input_dims: str, max_tensors: int = 3) -> str:
    """`8944x1024, 1024x2816`: the first tensor shapes of an op, for titles and tables."""
    shapes: list[str] = []
    for dims in parse_json_list(input_dims):
        if is_shape(dims) and dims:
            shapes.append("x".join(str(d) for d in dims))
        elif isinstance(dims, list) and dims and all(is_shape(d) for d in dims):
            shapes.append("[" + ", ".join("x".join(str(x) for x in d) for d in dims if d) + "]")
    if len(shapes) > max_tensors:
        shapes = shapes[:max_tensors] + ["..."]
    return ", ".join(shapes)


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def name_matches(name: str, keywords: Iterable[str]) -> bool:
    lowered = name.lower()
    return any(k in lowered for k in keywords)


def base_op_name(name: str) -> str:
    """`aten::add_` -> `add`: the op without namespace and in-place suffix."""
    base = name.split("::")[-1].split("->")[0].strip()
    return base.rstrip("_").lstrip("_") or base


def slower_side(time_trace1_ms: float | None, time_trace2_ms: float | None) -> str:
    """Which trace of a matched op is slower and by how many times ("T2 3.04x slower"); "same"
    within settings.SAME_SPEED_RATIO; "—" when a side has no time."""
    if not time_trace1_ms or not time_trace2_ms or time_trace1_ms <= 0 or time_trace2_ms <= 0:
        return "—"
    ratio = max(time_trace1_ms, time_trace2_ms) / min(time_trace1_ms, time_trace2_ms)
    if ratio < SAME_SPEED_RATIO:
        return "same"
    return f"T{1 if time_trace1_ms > time_trace2_ms else 2} {ratio:.2f}x slower"
