"""Exact timestamps for traces on an absolute clock.

2023-era Kineto traces (and others) write `ts` as absolute epoch microseconds, ~1.7e15, where float64
holds only steps of 0.25 µs: nanosecond timestamps (`1694128201435418.123`) are rounded on parse and
busy time shifts by up to 0.2 %. For such a trace (sampled start above EXACT_TS_ABOVE_US) ingest
picks an integer base (a whole second at or before the trace window's start), reads each `ts` from
its JSON text as a decimal and stores `ts - base`, which float64 holds to far below a nanosecond; the
base is the trace's `ts_base_us` (trace_files / traces), and what TraceLake writes back out adds it.
Traces on a relative clock keep base 0 and the plain float decode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.ingest.limits import EXACT_TS_ABOVE_US

_US_PER_SECOND = 1_000_000
# Decimal digits the offsets are computed with: 19 integer digits (int64 µs) and 9 fraction digits
# (a thousandth of a nanosecond, past Kineto's ns resolution); more fraction digits take the slow path.
_EXACT = pa.decimal128(28, 9)
_NO_RAW = msgspec.Raw(b"")


class _TsOnly(msgspec.Struct, gc=False):
    ts: msgspec.Raw = _NO_RAW


_TS_ONLY: msgspec.json.Decoder[list[_TsOnly]] = msgspec.json.Decoder(list[_TsOnly])
_ONE_TS: msgspec.json.Decoder[_TsOnly] = msgspec.json.Decoder(_TsOnly)


def ts_base_us(window_start_us: float) -> int:
    """The integer base of a trace whose window starts at `window_start_us`; 0 on a relative clock."""
    if not math.isfinite(window_start_us) or window_start_us <= EXACT_TS_ABOVE_US:
        return 0
    return math.floor(window_start_us / _US_PER_SECOND) * _US_PER_SECOND


def ts_texts(joined: bytes, chunk: Sequence[msgspec.Raw]) -> pa.Array:
    """Each event's `ts` as written (its JSON text, quotes removed; null when absent), from the chunk as
    one JSON array, built as one Arrow buffer (no Python object per event)."""
    try:
        raws = [e.ts for e in _TS_ONLY.decode(joined)]
    except (msgspec.DecodeError, RecursionError):  # an element that is not an object
        raws = []
        for raw in chunk:
            try:
                raws.append(_ONE_TS.decode(raw).ts)
            except (msgspec.DecodeError, RecursionError):
                raws.append(_NO_RAW)
    lengths = np.fromiter(map(len, raws), dtype=np.int64, count=len(raws))
    offsets = np.zeros(len(raws) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    texts = pa.LargeStringArray.from_buffers(len(raws), pa.py_buffer(offsets), pa.py_buffer(b"".join(raws)))
    texts = pc.utf8_trim(texts.cast(pa.string()), '"')
    return pc.if_else(pc.is_in(texts, value_set=pa.array(["", "null"])), pa.scalar(None, pa.string()), texts)


def exact_offsets(strings: pa.Array, base_us: int, parsed: pa.Array) -> pa.Array:
    """`ts - base_us` (float64 µs) computed in decimal from each ts's text (`ts_texts`: a number, or a
    string spelling one); where the text holds no number, the float the decode `parsed` (its nulls stay)."""
    try:
        exact = pc.subtract(pc.cast(strings, _EXACT), pa.scalar(Decimal(base_us), _EXACT))
        offsets = pc.cast(exact, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a value Arrow cannot parse: one at a time
        offsets = pa.array([_offset(text, base_us) for text in strings.to_pylist()], pa.float64())
    return pc.if_else(pc.is_null(parsed), parsed, pc.coalesce(offsets, pc.subtract(parsed, float(base_us))))


def _offset(text: str | None, base_us: int) -> float | None:
    if text is None:
        return None
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return float(value - base_us) if value.is_finite() else None
