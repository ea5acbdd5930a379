"""Decode raw trace events, chunk by chunk, into typed Arrow columns.

Events are decoded into small msgspec structs one chunk at a time (never all at once, never as
dicts), checked, and turned into Arrow arrays. The `events` table keeps every valid event with its
`args` as JSON text; the host, GPU and flow subsets get typed columns from `args`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

CHUNK_EVENTS = 100_000
HOST_CATEGORIES = frozenset({"cpu_op", "cuda_runtime", "cuda_driver", "python_function"})
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
FLOW_PHASES = frozenset({"s", "f", "t"})


# An absent field; msgspec cannot put Raw in a union with None.
_NO_RAW = msgspec.Raw(b"")


class RawEvent(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = None
    bp: Any = None
    args: msgspec.Raw = _NO_RAW


class EventArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    device: Any = None
    stream: Any = None
    bytes: Any = None
    kind: Any = None
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    input_strides: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Strides")
    concrete_inputs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    sequence_number: Any = msgspec.field(default=None, name="Sequence number")
    fwd_thread_id: Any = msgspec.field(default=None, name="Fwd thread id")
    record_function_id: Any = msgspec.field(default=None, name="Record function id")


_EVENT_LIST = msgspec.json.Decoder(list[RawEvent])
_ARGS_LIST = msgspec.json.Decoder(list[EventArgs])
_ANY = msgspec.json.Decoder()
_EMPTY_ARGS = EventArgs()


def _is_number(value: Any) -> bool:
    kind = type(value)
    return (kind is float and math.isfinite(value)) or kind is int


def _as_int(value: Any) -> int | None:
    kind = type(value)
    if kind is int:
        return value
    if kind is str:
        try:
            return int(value, 0)
        except ValueError:
            return None
    if kind is float and value.is_integer():
        return int(value)
    return None


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    return value if type(value) is str else str(value)


def _present(raw: msgspec.Raw) -> bool:
    return len(raw) > 0 and raw != b"null"


def _raw_text(raw: msgspec.Raw) -> str | None:
    return bytes(raw).decode("utf-8", "replace") if _present(raw) else None


def _json_text_array(raws: list[msgspec.Raw]) -> pa.Array:
    """One Arrow string array from raw JSON slices, built from one joined buffer."""
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(raws)
    validity = lengths > 0
    null_count = int(len(raws) - validity.sum())
    bitmap = pa.py_buffer(np.packbits(validity, bitorder="little")) if null_count else None
    array = pa.LargeStringArray.from_buffers(
        len(raws), pa.py_buffer(offsets), pa.py_buffer(data), bitmap, null_count
    )
    return array.cast(pa.string())


def _decode_chunk(chunk: list[msgspec.Raw], skipped: Counter[str]) -> list[RawEvent | None]:
    try:
        return _EVENT_LIST.decode(b"[" + b",".join(chunk) + b"]")
    except msgspec.ValidationError:
        decoded: list[RawEvent | None] = []
        single = msgspec.json.Decoder(RawEvent)
        for raw in chunk:
            try:
                decoded.append(single.decode(raw))
            except msgspec.ValidationError:
                skipped["not_an_object"] += 1
                decoded.append(None)
        return decoded


def _decode_args(events: list[RawEvent]) -> list[EventArgs]:
    raws = [e.args for e in events]
    try:
        return _ARGS_LIST.decode(b"[" + b",".join(r if _present(r) else b"{}" for r in raws) + b"]")
    except msgspec.ValidationError:
        single = msgspec.json.Decoder(EventArgs)
        out: list[EventArgs] = []
        for raw in raws:
            try:
                out.append(single.decode(raw) if _present(raw) else _EMPTY_ARGS)
            except msgspec.ValidationError:
                out.append(_EMPTY_ARGS)
        return out


def _drop_reason(event: RawEvent) -> str | None:
    """Why an event cannot be used, or None when it is usable."""
    ph = event.ph
    if type(ph) is not str or not ph:
        return "missing_phase"
    if ph == "M":
        return None
    if event.ts is None:
        return "missing_ts"
    if not _is_number(event.ts):
        return "non_numeric_ts"
    if event.ts < 0:
        return "negative_ts"
    if ph == "X":
        if event.dur is None:
            return "missing_dur"
        if not _is_number(event.dur):
            return "non_numeric_dur"
        if event.dur < 0:
            return "negative_dur"
        if type(event.name) is not str:
            return "missing_name"
    return None


@dataclass
class DecodedTrace:
    """Everything ingest needs from one trace's events."""

    event_batches: list[pa.RecordBatch]
    host: pa.Table
    gpu: pa.Table
    flows: pa.Table
    event_count: int
    dropped: Counter[str]
    phase_counts: Counter[str]
    category_counts: Counter[str]
    linking_key: str


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
    ]
)


def _chunks(raw_events: list[msgspec.Raw]) -> Iterator[tuple[int, list[msgspec.Raw]]]:
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        yield start, raw_events[start : start + CHUNK_EVENTS]


def decode_events(raw_events: list[msgspec.Raw]) -> DecodedTrace:
    host_parts: list[dict[str, list[Any]]] = []
    gpu_parts: list[dict[str, list[Any]]] = []
    flow_parts: list[dict[str, list[Any]]] = []
    batches: list[pa.RecordBatch] = []
    dropped: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    linking_key: str | None = None
    kept_total = 0

    for start, chunk in _chunks(raw_events):
        decoded = _decode_chunk(chunk, dropped)
        kept: list[RawEvent] = []
        kept_idx: list[int] = []
        for offset, event in enumerate(decoded):
            if event is None:
                continue
            reason = _drop_reason(event)
            if reason is not None:
                dropped[reason] += 1
                continue
            kept.append(event)
            kept_idx.append(start + offset)
        if not kept:
            continue
        kept_total += len(kept)
        cats = [e.cat if type(e.cat) is str else None for e in kept]
        phases.update(e.ph for e in kept)
        categories.update(c or "" for c in cats)
        args = _decode_args(kept)
        correlations = [_as_int(a.correlation) for a in args]
        external_ids = [_as_int(a.external_id) for a in args]
        pids = [_as_text(e.pid) for e in kept]
        tids = [_as_text(e.tid) for e in kept]
        ts = [float(e.ts) if e.ts is not None and _is_number(e.ts) else None for e in kept]
        dur = [float(e.dur) if _is_number(e.dur) else None for e in kept]
        names = [_as_text(e.name) for e in kept]

        if linking_key is None:
            for cat, name, arg in zip(cats, names, args):
                if cat in ("cuda_runtime", "cuda_driver") and name and "launch" in name.lower():
                    linking_key = "correlation" if arg.correlation is not None else "External id"
                    break

        batches.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(kept_idx, pa.int64()),
                    pa.array([e.ph for e in kept], pa.string()),
                    pa.array(cats, pa.string()),
                    pa.array(names, pa.string()),
                    pa.array(ts, pa.float64()),
                    pa.array(dur, pa.float64()),
                    pa.array(pids, pa.string()),
                    pa.array(tids, pa.string()),
                    pa.array([_as_int(e.id) for e in kept], pa.int64()),
                    pa.array(correlations, pa.int64()),
                    pa.array(external_ids, pa.int64()),
                    _json_text_array([e.args for e in kept]),
                ],
                schema=EVENT_SCHEMA,
            )
        )

        host_rows = [i for i, (c, e) in enumerate(zip(cats, kept)) if c in HOST_CATEGORIES and e.ph == "X"]
        gpu_rows = [i for i, (c, e) in enumerate(zip(cats, kept)) if c in GPU_CATEGORIES and e.ph == "X"]
        flow_rows = [i for i, e in enumerate(kept) if e.ph in FLOW_PHASES]
        if host_rows:
            host_parts.append(
                {
                    "event_idx": [kept_idx[i] for i in host_rows],
                    "cat": [cats[i] for i in host_rows],
                    "name": [names[i] for i in host_rows],
                    "ts": [ts[i] for i in host_rows],
                    "dur": [dur[i] for i in host_rows],
                    "pid": [pids[i] for i in host_rows],
                    "tid": [tids[i] for i in host_rows],
                    "correlation": [correlations[i] for i in host_rows],
                    "external_id": [external_ids[i] for i in host_rows],
                    "input_dims": [_raw_text(args[i].input_dims) for i in host_rows],
                    "input_type": [_raw_text(args[i].input_type) for i in host_rows],
                    "input_strides": [_raw_text(args[i].input_strides) for i in host_rows],
                    "concrete_inputs": [_raw_text(args[i].concrete_inputs) for i in host_rows],
                    "sequence_number": [_as_int(args[i].sequence_number) for i in host_rows],
                    "fwd_thread_id": [_as_int(args[i].fwd_thread_id) for i in host_rows],
                    "record_function_id": [_as_int(args[i].record_function_id) for i in host_rows],
                }
            )
        if gpu_rows:
            gpu_parts.append(
                {
                    "event_idx": [kept_idx[i] for i in gpu_rows],
                    "cat": [cats[i] for i in gpu_rows],
                    "name": [names[i] for i in gpu_rows],
                    "ts": [ts[i] for i in gpu_rows],
                    "dur": [dur[i] for i in gpu_rows],
                    "pid": [pids[i] for i in gpu_rows],
                    "tid": [tids[i] for i in gpu_rows],
                    "device": [_as_int(args[i].device) for i in gpu_rows],
                    "stream": [_as_int(args[i].stream) for i in gpu_rows],
                    "correlation": [correlations[i] for i in gpu_rows],
                    "external_id": [external_ids[i] for i in gpu_rows],
                    "bytes": [_as_int(args[i].bytes) for i in gpu_rows],
                    "kind": [_as_text(args[i].kind) for i in gpu_rows],
                    "grid": [_raw_text(args[i].grid) for i in gpu_rows],
                    "block": [_raw_text(args[i].block) for i in gpu_rows],
                }
            )
        if flow_rows:
            flow_parts.append(
                {
                    "event_idx": [kept_idx[i] for i in flow_rows],
                    "cat": [cats[i] for i in flow_rows],
                    "ph": [kept[i].ph for i in flow_rows],
                    "flow_id": [_as_int(kept[i].id) for i in flow_rows],
                    "ts": [ts[i] for i in flow_rows],
                    "pid": [pids[i] for i in flow_rows],
                    "tid": [tids[i] for i in flow_rows],
                    "bp": [_as_text(kept[i].bp) for i in flow_rows],
                }
            )

    return DecodedTrace(
        event_batches=batches,
        host=_concat_parts(host_parts, HOST_SCHEMA),
        gpu=_concat_parts(gpu_parts, GPU_SCHEMA),
        flows=_concat_parts(flow_parts, FLOW_SCHEMA),
        event_count=kept_total,
        dropped=dropped,
        phase_counts=phases,
        category_counts=categories,
        linking_key=linking_key or "correlation",
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


def _concat_parts(parts: list[dict[str, list[Any]]], schema: pa.Schema) -> pa.Table:
    if not parts:
        return schema.empty_table()
    tables = [pa.table({f.name: pa.array(p[f.name], f.type) for f in schema}, schema=schema) for p in parts]
    return pa.concat_tables(tables)
