"""The Arrow schemas of the tables decode writes: `events` (every valid event) and its typed host,
GPU and flow subsets."""

from __future__ import annotations

import pyarrow as pa

EVENT_SCHEMA = pa.schema(
    [
        ("event_idx", pa.int64()),
        ("ph", pa.string()),
        ("cat", pa.string()),
        ("name", pa.string()),
        ("ts", pa.float64()),
        ("dur", pa.float64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("flow_id", pa.int64()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("args", pa.string()),
        ("has_args", pa.bool_()),  # lets linking skip reading the args text
    ]
)

HOST_SCHEMA = pa.schema(
    [
        ("event_idx", pa.int64()),
        ("cat", pa.string()),
        ("name", pa.string()),
        ("ts", pa.float64()),
        ("dur", pa.float64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("input_dims", pa.string()),
        ("input_type", pa.string()),
        ("input_strides", pa.string()),
        ("concrete_inputs", pa.string()),
        ("sequence_number", pa.int64()),
        ("fwd_thread_id", pa.int64()),
        ("record_function_id", pa.int64()),
    ]
)

GPU_SCHEMA = pa.schema(
    [
        ("event_idx", pa.int64()),
        ("cat", pa.string()),
        ("name", pa.string()),
        ("ts", pa.float64()),
        ("dur", pa.float64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("device", pa.int64()),
        ("stream", pa.int64()),
        ("correlation", pa.int64()),
        ("external_id", pa.int64()),
        ("bytes", pa.int64()),
        ("kind", pa.string()),
        ("grid", pa.string()),
        ("block", pa.string()),
    ]
)

FLOW_SCHEMA = pa.schema(
    [
        ("event_idx", pa.int64()),
        ("cat", pa.string()),
        ("ph", pa.string()),
        ("flow_id", pa.int64()),
        ("ts", pa.float64()),
        ("pid", pa.string()),
        ("tid", pa.string()),
        ("bp", pa.string()),
    ]
)
