"""Decode raw trace events, chunk by chunk, into typed Arrow columns.

Each chunk of raw event slices is decoded by msgspec into small typed structs (never dicts),
turned column by column into Arrow arrays, checked with vectorized masks and split into the
tables ingest writes. The `events` table keeps every valid event with its `args` as JSON text;
the host, GPU and flow subsets get typed columns from `args`. A chunk holding a malformed event
(wrong JSON types) is decoded again leniently, so one bad event never costs the whole trace.
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
import pyarrow.compute as pc

CHUNK_EVENTS = 100_000
HOST_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver", "python_function")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
FLOW_PHASES = ("s", "f", "t")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")

# An absent field; msgspec cannot put Raw in a union with None.
_NO_RAW = msgspec.Raw(b"")


class RawEvent(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    ts: float | None = None
    dur: float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    id: int | str | None = None
    bp: str | None = None
    args: msgspec.Raw = _NO_RAW


class LooseEvent(msgspec.Struct, gc=False):
    """The same fields with any JSON type, for chunks the typed decoder rejects."""

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
    """The args ingest types. Scalars stay `Any` (ints in practice; `bytes` is sometimes a
    string) and are coerced per column, so an odd value never fails the whole chunk."""

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


_EVENTS = msgspec.json.Decoder(list[RawEvent])
_LOOSE_EVENT = msgspec.json.Decoder(LooseEvent)
_ARGS = msgspec.json.Decoder(list[EventArgs])
_ONE_ARGS = msgspec.json.Decoder(EventArgs)
_EMPTY_ARGS = EventArgs()


def _number_or_none(value: Any) -> float | None:
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return float(value)
    return None


def _int_or_none(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    if type(value) is str:
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def _str_or_none(value: Any) -> str | None:
    return value if type(value) is str else None


def _id_or_none(value: Any) -> int | str | None:
    return value if type(value) in (int, str) else None


def _decode_events(chunk: list[msgspec.Raw]) -> tuple[list[RawEvent | None], dict[int, str]]:
    """Typed decode; on a type error, decode each event leniently and note why ones are bad."""
    try:
        return _EVENTS.decode(b"[" + b",".join(chunk) + b"]"), {}
    except msgspec.ValidationError:
        pass
    events: list[RawEvent | None] = []
    reasons: dict[int, str] = {}
    for offset, raw in enumerate(chunk):
        try:
            loose = _LOOSE_EVENT.decode(raw)
        except msgspec.ValidationError:
            reasons[offset] = "not_an_object"
            events.append(None)
            continue
        ts, dur = _number_or_none(loose.ts), _number_or_none(loose.dur)
        if loose.ts is not None and ts is None:
            reasons[offset] = "non_numeric_ts"
        elif loose.ph == "X" and loose.dur is not None and dur is None:
            reasons[offset] = "non_numeric_dur"
        events.append(
            RawEvent(
                ph=_str_or_none(loose.ph), cat=_str_or_none(loose.cat), name=_str_or_none(loose.name),
                ts=ts, dur=dur, pid=_id_or_none(loose.pid), tid=_id_or_none(loose.tid),
                id=_id_or_none(loose.id), bp=_str_or_none(loose.bp), args=loose.args,
            )
        )
    return events, reasons


def _present(raw: msgspec.Raw) -> bool:
    return len(raw) > 0 and raw != b"null"


def _decode_args(raws: list[msgspec.Raw]) -> list[EventArgs]:
    try:
        return _ARGS.decode(b"[" + b",".join(r if _present(r) else b"{}" for r in raws) + b"]")
    except msgspec.ValidationError:  # an args value that is not a JSON object
        pass
    out: list[EventArgs] = []
    for raw in raws:
        try:
            out.append(_ONE_ARGS.decode(raw) if _present(raw) else _EMPTY_ARGS)
        except msgspec.ValidationError:
            out.append(_EMPTY_ARGS)
    return out


def _json_text_array(raws: list[msgspec.Raw]) -> pa.Array:
    """One Arrow string array from raw JSON slices, built from one joined buffer."""
    lengths = np.fromiter((len(r) for r in raws), dtype=np.int64, count=len(raws))
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    validity = lengths > 0
    null_count = int(len(raws) - validity.sum())
    bitmap = pa.py_buffer(np.packbits(validity, bitorder="little")) if null_count else None
    array = pa.LargeStringArray.from_buffers(
        len(raws), pa.py_buffer(offsets), pa.py_buffer(b"".join(raws)), bitmap, null_count
    )
    return array.cast(pa.string())


def _text_column(values: list[Any]) -> pa.Array:
    """pid/tid/id are ints or strings in traces; keep them as text so one type holds both."""
    return pa.array([v if v is None or type(v) is str else str(v) for v in values], pa.string())


def _int_column(values: list[Any]) -> pa.Array:
    return pa.array([v if type(v) is int or v is None else _int_or_none(v) for v in values], pa.int64())


def _str_column(values: list[Any]) -> pa.Array:
    return pa.array([v if type(v) is str or v is None else str(v) for v in values], pa.string())


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


def _chunks(raw_events: list[msgspec.Raw]) -> Iterator[tuple[int, list[msgspec.Raw]]]:
    for start in range(0, len(raw_events), CHUNK_EVENTS):
        yield start, raw_events[start : start + CHUNK_EVENTS]


def _drop_masks(columns: dict[str, pa.Array]) -> dict[str, pa.Array]:
    """Why each event is unusable, as boolean masks checked in order (first reason wins)."""
    ph, ts, dur, name = columns["ph"], columns["ts"], columns["dur"], columns["name"]
    timed = pc.not_equal(ph, "M")
    complete = pc.equal(ph, "X")
    return {
        "missing_phase": pc.or_kleene(pc.is_null(ph), pc.equal(ph, "")),
        "missing_ts": pc.and_(timed, pc.is_null(ts)),
        "negative_ts": pc.and_(timed, pc.less(ts, 0.0)),
        "missing_dur": pc.and_(complete, pc.is_null(dur)),
        "negative_dur": pc.and_(complete, pc.less(dur, 0.0)),
        "missing_name": pc.and_(complete, pc.is_null(name)),
    }


def decode_events(raw_events: list[msgspec.Raw]) -> DecodedTrace:
    batches: list[pa.RecordBatch] = []
    host_tables: list[pa.Table] = []
    gpu_tables: list[pa.Table] = []
    flow_tables: list[pa.Table] = []
    dropped: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    linking_key: str | None = None

    for start, chunk in _chunks(raw_events):
        events, pre_reasons = _decode_events(chunk)
        dropped.update(pre_reasons.values())
        usable = [e is not None and i not in pre_reasons for i, e in enumerate(events)]
        events = [e if ok else RawEvent() for e, ok in zip(events, usable)]
        args = _decode_args([e.args for e in events])
        columns: dict[str, pa.Array] = {
            "event_idx": pa.array(np.arange(start, start + len(events), dtype=np.int64)),
            "ph": pa.array([e.ph for e in events], pa.string()),
            "cat": pa.array([e.cat for e in events], pa.string()),
            "name": pa.array([e.name for e in events], pa.string()),
            "ts": pa.array([e.ts for e in events], pa.float64()),
            "dur": pa.array([e.dur for e in events], pa.float64()),
            "pid": _text_column([e.pid for e in events]),
            "tid": _text_column([e.tid for e in events]),
            "flow_id": _int_column([e.id for e in events]),
            "correlation": _int_column([a.correlation for a in args]),
            "external_id": _int_column([a.external_id for a in args]),
            "args": _json_text_array([e.args for e in events]),
        }
        keep = pa.array(usable, pa.bool_())
        for reason, mask in _drop_masks(columns).items():
            hit = pc.and_(keep, pc.fill_null(mask, False))
            dropped[reason] += pc.sum(hit).as_py() or 0
            keep = pc.and_(keep, pc.invert(hit))
        typed = {
            "device": _int_column([a.device for a in args]),
            "stream": _int_column([a.stream for a in args]),
            "bytes": _int_column([a.bytes for a in args]),
            "kind": _str_column([a.kind for a in args]),
            "grid": _json_text_array([a.grid for a in args]),
            "block": _json_text_array([a.block for a in args]),
            "input_dims": _json_text_array([a.input_dims for a in args]),
            "input_type": _json_text_array([a.input_type for a in args]),
            "input_strides": _json_text_array([a.input_strides for a in args]),
            "concrete_inputs": _json_text_array([a.concrete_inputs for a in args]),
            "sequence_number": _int_column([a.sequence_number for a in args]),
            "fwd_thread_id": _int_column([a.fwd_thread_id for a in args]),
            "record_function_id": _int_column([a.record_function_id for a in args]),
            "bp": pa.array([e.bp for e in events], pa.string()),
        }
        table = pa.table({**columns, **typed}).filter(keep)
        if table.num_rows == 0:
            continue
        phases.update({row["values"]: row["counts"] for row in pc.value_counts(table["ph"]).to_pylist()})
        batches.append(pa.RecordBatch.from_arrays([table[f.name].combine_chunks() for f in EVENT_SCHEMA], schema=EVENT_SCHEMA))
        complete = pc.equal(table["ph"], "X")
        host_tables.append(_subset(table, pc.and_(complete, pc.is_in(table["cat"], pa.array(HOST_CATEGORIES))), HOST_SCHEMA))
        gpu_tables.append(_subset(table, pc.and_(complete, pc.is_in(table["cat"], pa.array(GPU_CATEGORIES))), GPU_SCHEMA))
        flow_tables.append(_subset(table, pc.is_in(table["ph"], pa.array(FLOW_PHASES)), FLOW_SCHEMA))
        if linking_key is None:
            linking_key = _linking_key(table)

    return DecodedTrace(
        event_batches=batches,
        host=_concat(host_tables, HOST_SCHEMA),
        gpu=_concat(gpu_tables, GPU_SCHEMA),
        flows=_concat(flow_tables, FLOW_SCHEMA),
        event_count=sum(b.num_rows for b in batches),
        dropped=Counter({k: v for k, v in dropped.items() if v}),
        phase_counts=phases,
        linking_key=linking_key or "correlation",
    )


def _linking_key(table: pa.Table) -> str | None:
    """TraceLens: `correlation` if the first launch-like runtime call carries one, else `External id`."""
    is_launch = pc.and_(
        pc.is_in(table["cat"], pa.array(RUNTIME_CATEGORIES)),
        pc.match_substring(pc.utf8_lower(table["name"]), "launch"),
    )
    launches = table.filter(pc.fill_null(is_launch, False))
    if launches.num_rows == 0:
        return None
    return "correlation" if launches["correlation"][0].is_valid else "External id"


def _subset(table: pa.Table, mask: pa.Array, schema: pa.Schema) -> pa.Table:
    return table.filter(pc.fill_null(mask, False)).select(schema.names).cast(schema)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()
