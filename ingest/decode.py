"""Decode raw trace events, chunk by chunk, into typed Arrow columns.

Each chunk of raw event slices is decoded by msgspec into small typed structs (never dicts),
turned column by column into Arrow arrays, checked with vectorized masks and split into the
tables ingest writes. The `events` table keeps every valid event with its `args` as JSON text;
the host, GPU and flow subsets get typed columns from `args`. A chunk holding a malformed event
(wrong JSON types, numbers out of range) is decoded again leniently, so one bad event never costs
the whole trace. Events that start outside the trace's window (`trace_window`, from a sample of
all start times) or end after it are physically impossible and dropped like malformed ones; ids
beyond int64 are stored as null. Both are counted, by reason, for the ingest checks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.ingest.event_variants import (
    BEGIN_END_PHASES,
    BEGIN_END_SCHEMA,
    BeginEndPairs,
    read_pairs,
    unrecognized_device_mask,
)
from tracelake.ingest.exact_time import exact_offsets, ts_base_us, ts_texts
from tracelake.ingest.limits import TRACE_WINDOW_MADS, TRACE_WINDOW_MIN_HALF_WIDTH_US, TRACE_WINDOW_SAMPLE_EVENTS
from tracelake.ingest.long_names import clip_long_names
from tracelake.ingest.table_schemas import EVENT_SCHEMA, FLOW_SCHEMA, GPU_SCHEMA, HOST_SCHEMA

CHUNK_EVENTS = 50_000  # events decoded at once: 100k held ~40 MB more per process at no speed gain (bench/analyze.py)
HOST_CATEGORIES = ("cpu_op", "cuda_runtime", "cuda_driver")
# Of the python frames only the nn.Module ones shape the host tree's results (module chains);
# the rest stay in `events` and are left out of the sequential tree walk.
MODULE_FRAME_PREFIX = "nn.Module: "
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
FLOW_PHASES = ("s", "f", "t")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver")
# Event categories by their lower-cased spelling, surrounding whitespace removed -> the name every later
# stage reads. Older profilers wrote `Kernel`, `Runtime`, `Memcpy`, `Memset` and `Operator` (PyTorch
# 1.8 / tb-plugin's EventTypeMap); Kineto's own aliases: `mtia_ccp_events` is its CONCURRENT_KERNEL on
# MTIA and `mtia_runtime` its RUNTIME (libkineto ActivityType.h); other tools and hand-written traces
# spell GPU work `cuda_kernel`, `gpu_kernel`, `concurrent_kernel`, `hip_kernel`, `*_memcpy`.
CATEGORY_NAMES = {
    "kernel": "kernel",
    "cuda_kernel": "kernel",
    "gpu_kernel": "kernel",
    "hip_kernel": "kernel",
    "concurrent_kernel": "kernel",
    "mtia_ccp_events": "kernel",
    "memcpy": "gpu_memcpy",
    "gpu_memcpy": "gpu_memcpy",
    "cuda_memcpy": "gpu_memcpy",
    "hip_memcpy": "gpu_memcpy",
    "memset": "gpu_memset",
    "gpu_memset": "gpu_memset",
    "cuda_memset": "gpu_memset",
    "hip_memset": "gpu_memset",
    "runtime": "cuda_runtime",
    "cuda_runtime": "cuda_runtime",
    "hip_runtime": "cuda_runtime",
    "mtia_runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "driver": "cuda_driver",
    "hip_driver": "cuda_driver",
    "operator": "cpu_op",
    "cpu_op": "cpu_op",
    "python_function": "python_function",
    "user_annotation": "user_annotation",
    "gpu_user_annotation": "gpu_user_annotation",
}
_CATEGORY_SPELLINGS = pa.array(list(CATEGORY_NAMES), pa.string())
_CATEGORY_CURRENT = pa.array(list(CATEGORY_NAMES.values()), pa.string())

# An absent field; msgspec cannot put Raw in a union with None.
_NO_RAW = msgspec.Raw(b"")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# What msgspec raises on JSON it cannot decode into a struct: wrong types and numbers out of range
# (ValidationError, a DecodeError), and values nested past Python's recursion limit.
_UNDECODABLE = (msgspec.DecodeError, RecursionError)


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


_EVENTS: msgspec.json.Decoder[list[RawEvent]] = msgspec.json.Decoder(list[RawEvent])
_LOOSE_EVENT: msgspec.json.Decoder[LooseEvent] = msgspec.json.Decoder(LooseEvent)
_ARGS: msgspec.json.Decoder[list[EventArgs]] = msgspec.json.Decoder(list[EventArgs])
_ONE_ARGS: msgspec.json.Decoder[EventArgs] = msgspec.json.Decoder(EventArgs)
_EMPTY_ARGS = EventArgs()


def _number_or_none(value: Any, converted: Counter[str] | None = None) -> float | None:
    """A finite number from a JSON number, or from a string that spells one ("123.5"; counted in
    `converted`); None otherwise."""
    if type(value) is float and math.isfinite(value):
        return value
    if type(value) is str and converted is not None:
        try:
            number = float(value.strip())
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        converted["number_from_string"] += 1
        return number
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:  # hundreds of digits
            return None
    return None


def int_or_none(value: Any) -> int | None:
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


def _decode_events(chunk: list[msgspec.Raw], converted: Counter[str]) -> tuple[list[RawEvent | None], dict[int, str], bytes]:
    """Typed decode; on a type error, decode each event leniently and note why ones are bad
    (numbers written as strings are read, counted in `converted`). Also returns the chunk as one
    JSON array, for the args pass."""
    joined = b"[" + b",".join(chunk) + b"]"
    try:
        return cast("list[RawEvent | None]", _EVENTS.decode(joined)), {}, joined
    except _UNDECODABLE:
        pass
    events: list[RawEvent | None] = []
    reasons: dict[int, str] = {}
    for offset, raw in enumerate(chunk):
        try:
            loose = _LOOSE_EVENT.decode(raw)
        except msgspec.ValidationError as exc:
            reasons[offset] = "number_out_of_range" if "out of range" in str(exc) else "not_an_object"
            events.append(None)
            continue
        except _UNDECODABLE:
            reasons[offset] = "undecodable"
            events.append(None)
            continue
        ts, dur = _number_or_none(loose.ts, converted), _number_or_none(loose.dur, converted)
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
    return events, reasons, joined


def _present(raw: msgspec.Raw) -> bool:
    return len(raw) > 0 and raw != b"null"


class _ArgsOnly(msgspec.Struct, gc=False):
    args: EventArgs | None = None


_ARGS_ONLY: msgspec.json.Decoder[list[_ArgsOnly]] = msgspec.json.Decoder(list[_ArgsOnly])


def _decode_chunk_args(joined: bytes, events: list[RawEvent]) -> list[EventArgs]:
    """Typed args of a whole chunk in one C-level pass over the chunk's JSON."""
    try:
        return [e.args or _EMPTY_ARGS for e in _ARGS_ONLY.decode(joined)]
    except _UNDECODABLE:  # an args value that is not a JSON object, a number out of range
        return _decode_args([e.args for e in events])


def _decode_args(raws: list[msgspec.Raw]) -> list[EventArgs]:
    try:
        return _ARGS.decode(b"[" + b",".join(r if _present(r) else b"{}" for r in raws) + b"]")
    except _UNDECODABLE:  # an args value that is not a JSON object, a number out of range
        pass
    out: list[EventArgs] = []
    for raw in raws:
        try:
            out.append(_ONE_ARGS.decode(raw) if _present(raw) else _EMPTY_ARGS)
        except _UNDECODABLE:
            out.append(_EMPTY_ARGS)
    return out


def _json_text_array(raws: list[msgspec.Raw]) -> pa.Array:
    """One Arrow string array from raw JSON slices, built from one joined buffer."""
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
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
    """pid/tid are ints or strings in traces; keep them as text so one type holds both."""
    try:
        return pa.array(values).cast(pa.string())  # all ints, or all strings: converted in C
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):  # mixed, or beyond 64 bits
        return pa.array([v if v is None or type(v) is str else str(v) for v in values], pa.string())


def _int_column(values: list[Any], repaired: Counter[str]) -> pa.Array:
    """int64 from ints, integral floats and int strings; anything else is null, and so are values
    beyond int64 (counted in `repaired`)."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        pass
    ints = [v if type(v) is int or v is None else int_or_none(v) for v in values]
    in_range = [v if v is None or _INT64_MIN <= v <= _INT64_MAX else None for v in ints]
    repaired["int_out_of_range"] += in_range.count(None) - ints.count(None)
    return pa.array(in_range, pa.int64())


def _str_column(values: list[Any]) -> pa.Array:
    return pa.array([v if type(v) is str or v is None else str(v) for v in values], pa.string())


@dataclass
class DecodedTrace:
    """Everything ingest needs from one trace's events."""

    host: pa.Table
    gpu: pa.Table
    flows: pa.Table
    event_count: int
    dropped: Counter[str]
    phase_counts: Counter[str]
    linking_key: str | None  # None until a launch-like runtime call is seen
    repaired: Counter[str] = field(default_factory=Counter)  # values stored as null, by reason
    # every usable B and E event (BEGIN_END_SCHEMA) when decoded without pairs, for pair_begin_end
    begin_end: pa.Table = field(default_factory=BEGIN_END_SCHEMA.empty_table)
    unrecognized_device: Counter[str] = field(default_factory=Counter)  # device-like events, by category
    begin_end_paired: int = 0  # B/E pairs read as complete events (set by the pairing pass)
    begin_end_unmatched: int = 0  # B never closed and E closing nothing, kept as written
    ts_base_us: int = 0  # subtracted from every ts (exact_time.py)


@dataclass(frozen=True)
class TraceWindow:
    """Where a trace's events can lie, in µs on the trace clock less `ts_base_us` (limits.py:
    TRACE_WINDOW_*; exact_time.py: the base, 0 unless the clock is absolute)."""

    start_us: float
    end_us: float
    ts_base_us: int = 0


class _Start(msgspec.Struct, gc=False):
    ph: str | None = None
    ts: float | None = None


_STARTS: msgspec.json.Decoder[list[_Start]] = msgspec.json.Decoder(list[_Start])


def trace_window(raw_events: Sequence[msgspec.Raw]) -> TraceWindow | None:
    """The median start of every k-th timed event +- the larger of TRACE_WINDOW_MADS median absolute
    deviations and TRACE_WINDOW_MIN_HALF_WIDTH_US; None when no sampled event has a numeric start."""
    sample = raw_events[:: max(1, len(raw_events) // TRACE_WINDOW_SAMPLE_EVENTS)]
    try:
        starts = _STARTS.decode(b"[" + b",".join(sample) + b"]")
    except _UNDECODABLE:  # an odd event in the sample: the others still count
        starts = []
        for raw in sample:
            try:
                loose = _LOOSE_EVENT.decode(raw)
            except _UNDECODABLE:
                continue
            # a number written as a string ("1694128201435418.5") still places the trace on its clock
            starts.append(_Start(_str_or_none(loose.ph), _number_or_none(loose.ts, Counter())))
    ts = np.array([s.ts for s in starts if s.ts is not None and s.ph != "M"], dtype=np.float64)
    if ts.size == 0:
        return None
    median = _median(ts)
    half_width = max(TRACE_WINDOW_MADS * _median(np.abs(ts - median)), TRACE_WINDOW_MIN_HALF_WIDTH_US)
    base = ts_base_us(median - half_width)
    return TraceWindow(median - half_width - base, median + half_width - base, base)


def _median(values: np.ndarray) -> float:
    """np.median without its first-call cost (~10 ms of lazy set-up); upper median of an even count."""
    return float(np.partition(values, values.size // 2)[values.size // 2])


def normalized_categories(categories: pa.Array) -> pa.Array:
    """`categories` with every legacy, alias or differently-cased or -padded spelling of CATEGORY_NAMES
    replaced by its current name; other categories (and nulls) unchanged."""
    position = pc.index_in(pc.utf8_lower(pc.utf8_trim_whitespace(categories)), value_set=_CATEGORY_SPELLINGS)
    return pc.if_else(pc.is_valid(position), pc.take(_CATEGORY_CURRENT, position), categories)


def _chunks(raw_events: Sequence[msgspec.Raw], first: int, stop: int) -> Iterator[tuple[int, list[msgspec.Raw]]]:
    for start in range(first, stop, CHUNK_EVENTS):
        yield start, list(raw_events[start : min(start + CHUNK_EVENTS, stop)])


def _drop_masks(columns: pa.Table, window: TraceWindow | None) -> dict[str, pa.Array]:
    """Why each event is unusable, as boolean masks checked in order (first reason wins)."""
    ph, ts, dur, name = columns["ph"], columns["ts"], columns["dur"], columns["name"]
    timed = pc.not_equal(ph, "M")
    complete = pc.equal(ph, "X")
    masks = {
        "missing_phase": pc.or_kleene(pc.is_null(ph), pc.equal(ph, "")),
        "missing_ts": pc.and_(timed, pc.is_null(ts)),
        "negative_ts": pc.and_(timed, pc.less(ts, 0.0)),
        "missing_dur": pc.and_(complete, pc.is_null(dur)),
        "negative_dur": pc.and_(timed, pc.less(dur, 0.0)),
    }
    if window is not None:
        masks["ts_outside_trace_window"] = pc.and_(
            timed, pc.or_(pc.less(ts, window.start_us), pc.greater(ts, window.end_us))
        )
        # a duration longer than the trace: the event starts inside the window and ends after it
        masks["ends_after_trace_window"] = pc.and_(timed, pc.greater(pc.add(ts, dur), window.end_us))
    masks["missing_name"] = pc.and_(complete, pc.is_null(name))
    # a metadata event labels a process (pid) or a thread (pid, tid): without them it labels nothing
    metadata = pc.equal(ph, "M")
    masks["metadata_without_pid"] = pc.and_(metadata, pc.is_null(columns["pid"]))
    masks["thread_metadata_without_tid"] = pc.and_(
        pc.and_(metadata, pc.starts_with(name, "thread_")), pc.is_null(columns["tid"])
    )
    return masks


def _base_table(start: int, events: Sequence[Any], args: list[EventArgs], joined: bytes, chunk: Sequence[msgspec.Raw],
                window: TraceWindow | None, repaired: Counter[str]) -> pa.Table:
    """One chunk's events as columns (timestamps exact past the window's base, when it has one)."""
    base = pa.table(
        {
            "event_idx": pa.array(np.arange(start, start + len(events), dtype=np.int64)),
            "ph": pa.array([e.ph for e in events], pa.string()),
            "cat": normalized_categories(pa.array([e.cat for e in events], pa.string())),
            "name": pa.array([e.name for e in events], pa.string()),
            "ts": pa.array([e.ts for e in events], pa.float64()),
            "dur": pa.array([e.dur for e in events], pa.float64()),
            "pid": _text_column([e.pid for e in events]),
            "tid": _text_column([e.tid for e in events]),
            "flow_id": _int_column([e.id for e in events], repaired),
            "correlation": _int_column([a.correlation for a in args], repaired),
            "external_id": _int_column([a.external_id for a in args], repaired),
            "args": _json_text_array([e.args for e in events]),
        }
    )
    base = base.append_column("has_args", pc.is_valid(base["args"]))
    if window is not None and window.ts_base_us:
        base = base.set_column(base.schema.get_field_index("ts"), "ts",
                               exact_offsets(ts_texts(joined, chunk), window.ts_base_us, base["ts"]))
    return base


def decode_events(
    raw_events: Sequence[msgspec.Raw],
    on_event_batch: Callable[[pa.RecordBatch], None],
    first: int = 0,
    stop: int | None = None,
    window: TraceWindow | None = None,
    pairs: BeginEndPairs | None = None,
) -> DecodedTrace:
    """Decode events [first, stop); hand each chunk's `events` rows to `on_event_batch` as it
    is ready (so they are written, not kept) and return the host, GPU and flow subsets. Events
    outside `window` (the whole trace's, from `trace_window`) are dropped. With `pairs` (the whole
    trace's, from pair_begin_end) each matched B reads as a complete event and its E as part of it."""
    host_tables: list[pa.Table] = []
    gpu_tables: list[pa.Table] = []
    flow_tables: list[pa.Table] = []
    begin_end_tables: list[pa.Table] = []
    unrecognized: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    repaired: Counter[str] = Counter()
    linking_key: str | None = None
    event_count = 0

    for start, chunk in _chunks(raw_events, first, len(raw_events) if stop is None else stop):
        decoded, pre_reasons, joined = _decode_events(chunk, repaired)
        dropped.update(pre_reasons.values())
        events: list[RawEvent]
        if pre_reasons:
            usable = [e is not None and i not in pre_reasons for i, e in enumerate(decoded)]
            events = [e if e is not None and ok else RawEvent() for e, ok in zip(decoded, usable)]
            args = _decode_args([e.args for e in events])
        else:  # every event decoded: none is None
            usable = [True] * len(decoded)
            events = cast(list[RawEvent], decoded)
            args = _decode_chunk_args(joined, events)
        base = _base_table(start, events, args, joined, chunk, window, repaired)
        base = clip_long_names(base, repaired, MODULE_FRAME_PREFIX)
        keep = pa.array(usable, pa.bool_())
        if pairs is not None:
            base, closing = read_pairs(base, pairs)
            keep = pc.and_(keep, pc.invert(closing))
        for reason, mask in _drop_masks(base, window).items():
            hit = pc.and_(keep, pc.fill_null(mask, False))
            dropped[reason] += pc.sum(hit).as_py() or 0
            keep = pc.and_(keep, pc.invert(hit))
        complete = pc.and_(keep, pc.fill_null(pc.equal(base["ph"], "X"), False))
        is_module_frame = pc.and_(
            pc.equal(base["cat"], "python_function"), pc.starts_with(base["name"], MODULE_FRAME_PREFIX)
        )
        is_host = _mask(pc.and_(complete, pc.or_(pc.is_in(base["cat"], pa.array(HOST_CATEGORIES)), is_module_frame)))
        is_gpu = _mask(pc.and_(complete, pc.is_in(base["cat"], pa.array(GPU_CATEGORIES))))
        is_flow = _mask(pc.and_(keep, pc.is_in(base["ph"], pa.array(FLOW_PHASES))))
        device_like = unrecognized_device_mask(base["cat"], base["args"], _mask(complete), is_host | is_gpu)
        if device_like.any():
            unrecognized.update(pc.fill_null(base["cat"].filter(pa.array(device_like)), "(none)").to_pylist())
        if pairs is None:
            begin_end = base.filter(pc.and_(keep, pc.fill_null(pc.is_in(base["ph"], pa.array(BEGIN_END_PHASES)), False)))
            begin_end_tables.append(begin_end.select(BEGIN_END_SCHEMA.names).cast(BEGIN_END_SCHEMA))

        kept = base.filter(keep)
        if kept.num_rows == 0:
            continue
        event_count += kept.num_rows
        on_event_batch(pa.RecordBatch.from_arrays([kept[f.name].combine_chunks() for f in EVENT_SCHEMA], schema=EVENT_SCHEMA))
        phases.update({row["values"]: row["counts"] for row in pc.value_counts(kept["ph"]).to_pylist()})
        if linking_key is None:
            linking_key = _linking_key(kept)

        typed_rows = np.flatnonzero(is_host | is_gpu).tolist()
        typed = base.drop_columns(["args"]).take(pa.array(typed_rows, pa.int64()))
        for column, values in _typed_arg_columns([args[i] for i in typed_rows], repaired).items():
            typed = typed.append_column(column, values)
        typed_is_host = is_host[np.asarray(typed_rows, dtype=np.int64)]
        host_tables.append(typed.filter(pa.array(typed_is_host)).select(HOST_SCHEMA.names).cast(HOST_SCHEMA))
        gpu_tables.append(typed.filter(pa.array(~typed_is_host)).select(GPU_SCHEMA.names).cast(GPU_SCHEMA))
        flow_rows = np.flatnonzero(is_flow).tolist()
        flows = base.drop_columns(["args"]).take(pa.array(flow_rows, pa.int64())).append_column(
            "bp", pa.array([events[i].bp for i in flow_rows], pa.string()))
        flow_tables.append(flows.select(FLOW_SCHEMA.names).cast(FLOW_SCHEMA))

    return DecodedTrace(
        host=_concat(host_tables, HOST_SCHEMA),
        gpu=_concat(gpu_tables, GPU_SCHEMA),
        flows=_concat(flow_tables, FLOW_SCHEMA),
        event_count=event_count,
        dropped=Counter({k: v for k, v in dropped.items() if v}),
        phase_counts=phases,
        linking_key=linking_key,
        repaired=Counter({k: v for k, v in repaired.items() if v}),
        begin_end=_concat(begin_end_tables, BEGIN_END_SCHEMA),
        unrecognized_device=unrecognized,
        ts_base_us=window.ts_base_us if window is not None else 0,
    )


def merge_decoded(parts: list[DecodedTrace]) -> DecodedTrace:
    """Join the results of consecutive event ranges (in file order)."""
    if len(parts) == 1:
        return parts[0]
    return DecodedTrace(
        host=pa.concat_tables([p.host for p in parts]),
        gpu=pa.concat_tables([p.gpu for p in parts]),
        flows=pa.concat_tables([p.flows for p in parts]),
        event_count=sum(p.event_count for p in parts),
        dropped=sum((p.dropped for p in parts), Counter()),
        phase_counts=sum((p.phase_counts for p in parts), Counter()),
        linking_key=next((p.linking_key for p in parts if p.linking_key), None),
        repaired=sum((p.repaired for p in parts), Counter()),
        begin_end=pa.concat_tables([p.begin_end for p in parts]),
        unrecognized_device=sum((p.unrecognized_device for p in parts), Counter()),
        ts_base_us=parts[0].ts_base_us,
    )


def _mask(array: pa.Array) -> np.ndarray:
    return pc.fill_null(array, False).to_numpy(zero_copy_only=False)


def _typed_arg_columns(args: list[EventArgs], repaired: Counter[str]) -> dict[str, pa.Array]:
    """The args ingest types, for the host and GPU rows only."""
    return {
        "device": _int_column([a.device for a in args], repaired),
        "stream": _int_column([a.stream for a in args], repaired),
        "bytes": _int_column([a.bytes for a in args], repaired),
        "kind": _str_column([a.kind for a in args]),
        "grid": _json_text_array([a.grid for a in args]),
        "block": _json_text_array([a.block for a in args]),
        "input_dims": _json_text_array([a.input_dims for a in args]),
        "input_type": _json_text_array([a.input_type for a in args]),
        "input_strides": _json_text_array([a.input_strides for a in args]),
        "concrete_inputs": _json_text_array([a.concrete_inputs for a in args]),
        "sequence_number": _int_column([a.sequence_number for a in args], repaired),
        "fwd_thread_id": _int_column([a.fwd_thread_id for a in args], repaired),
        "record_function_id": _int_column([a.record_function_id for a in args], repaired),
    }


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


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()
