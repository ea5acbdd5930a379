"""Make a big PyTorch profiler trace by tiling a real one's events K times.

    python bench/make_big_trace.py SOURCE_TRACE OUT_PATH --target-mb N
    python bench/make_big_trace.py SOURCE_TRACE OUT_PATH --copies K

Copy k (k = 0 .. K-1) of the source's events is shifted in time by k x (trace span + a gap) and
gets fresh ids: `args.correlation`, `args["External id"]`, `args["Sequence number"]` and the
top-level `id` of flow events (ph s/f/t) are offset by k x (largest id in the source + 1), so the
launch/kernel/flow links of one copy never meet another copy's. Metadata events (ph "M") are
written once. Every other top-level key (deviceProperties, runtime versions, ...) is kept, in its
original order. The output is written copy by copy, never as one big string: uncompressed JSON
unless OUT_PATH ends with .gz. MB means 10^6 bytes of uncompressed JSON.
"""

from __future__ import annotations

import argparse
import gzip
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec

MB = 1_000_000
EVENTS_KEY = "traceEvents"
GAP_US = 1_000
FLOW_PHASES = frozenset({"s", "f", "t"})
ARG_ID_KEYS = ("correlation", "External id", "Sequence number")
GZIP_LEVEL = 6

_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True)
class SourceTrace:
    """A loaded trace split into what is written once and what is tiled."""

    top_level: dict[str, Any]  # every key, in file order; the events key maps to None
    metadata_events: list[dict[str, Any]]
    tiled_events: list[dict[str, Any]]
    period_us: int  # time shift between consecutive copies
    id_stride: int  # id offset between consecutive copies


# ---- reading --------------------------------------------------------------------------------


def load_json(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    top = msgspec.json.decode(data)
    if not isinstance(top, dict) or not isinstance(top.get(EVENTS_KEY), list):
        raise SystemExit(f"{path}: not a Chrome trace (no '{EVENTS_KEY}' list)")
    return top


def is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def as_int(value: Any) -> int | None:
    if type(value) is int:
        return value
    if type(value) is str:
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


def event_ids(event: dict[str, Any]) -> Iterable[Any]:
    """The id values of one event that get a per-copy offset."""
    if event.get("ph") in FLOW_PHASES and "id" in event:
        yield event["id"]
    args = event.get("args")
    if isinstance(args, dict):
        for key in ARG_ID_KEYS:
            if key in args:
                yield args[key]


def max_id(events: list[dict[str, Any]]) -> int:
    ids = (as_int(value) for event in events for value in event_ids(event))
    return max((i for i in ids if i is not None), default=0)


def time_span_us(events: list[dict[str, Any]]) -> float:
    starts = [e["ts"] for e in events if is_number(e.get("ts"))]
    if not starts:
        return 0.0
    ends = [e["ts"] + (e["dur"] if is_number(e.get("dur")) else 0) for e in events if is_number(e.get("ts"))]
    return max(ends) - min(starts)


def load_source(path: Path) -> SourceTrace:
    top = load_json(path)
    events = [e for e in top[EVENTS_KEY] if isinstance(e, dict)]
    top[EVENTS_KEY] = None
    metadata = [e for e in events if e.get("ph") == "M"]
    tiled = [e for e in events if e.get("ph") != "M"]
    return SourceTrace(
        top_level=top,
        metadata_events=metadata,
        tiled_events=tiled,
        period_us=math.ceil(time_span_us(tiled)) + GAP_US,
        id_stride=max_id(tiled) + 1,
    )


# ---- tiling ---------------------------------------------------------------------------------


def shift_id(value: Any, offset: int) -> Any:
    """`value + offset`, keeping an id's type (ints stay ints, "0x.." strings stay hex strings)."""
    if type(value) is int:
        return value + offset
    number = as_int(value)
    if number is None:
        return value
    return hex(number + offset) if value.lower().startswith("0x") else str(number + offset)


def tile_event(event: dict[str, Any], ts_shift: int, id_offset: int) -> dict[str, Any]:
    out = dict(event)
    if ts_shift and is_number(out.get("ts")):
        out["ts"] = out["ts"] + ts_shift
    if not id_offset:
        return out
    if out.get("ph") in FLOW_PHASES and "id" in out:
        out["id"] = shift_id(out["id"], id_offset)
    args = out.get("args")
    if isinstance(args, dict) and any(key in args for key in ARG_ID_KEYS):
        args = dict(args)
        for key in ARG_ID_KEYS:
            if key in args:
                args[key] = shift_id(args[key], id_offset)
        out["args"] = args
    return out


def encode_copy(source: SourceTrace, index: int) -> bytes:
    """Copy `index` of the tiled events as comma-separated JSON objects (no brackets)."""
    events = [tile_event(e, index * source.period_us, index * source.id_stride) for e in source.tiled_events]
    return _ENCODER.encode(events)[1:-1]


def copies_for_target(source: SourceTrace, target_mb: float) -> int:
    """The copy count whose output size is nearest to `target_mb` (at least 1)."""
    fixed = len(_ENCODER.encode({**source.top_level, EVENTS_KEY: source.metadata_events}))
    per_copy = len(encode_copy(source, 1)) + 1
    return max(1, round((target_mb * MB - fixed) / per_copy))


# ---- writing --------------------------------------------------------------------------------


def open_output(path: Path, compress: bool) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        return gzip.open(path, "wb", compresslevel=GZIP_LEVEL)
    return path.open("wb")


def write_events(out: IO[bytes], source: SourceTrace, copies: int) -> int:
    written = out.write(b"[")
    first = True
    if source.metadata_events:
        written += out.write(_ENCODER.encode(source.metadata_events)[1:-1])
        first = False
    for index in range(copies):
        chunk = encode_copy(source, index)
        if not chunk:
            continue
        if not first:
            written += out.write(b",")
        written += out.write(chunk)
        first = False
    return written + out.write(b"]")


def write_trace(source: SourceTrace, path: Path, copies: int) -> int:
    """Write the tiled trace; returns the uncompressed JSON bytes written."""
    tmp = path.with_name(path.name + ".partial")
    with open_output(tmp, compress=path.name.endswith(".gz")) as out:
        written = out.write(b"{")
        for position, (key, value) in enumerate(source.top_level.items()):
            if position:
                written += out.write(b",")
            written += out.write(_ENCODER.encode(key) + b":")
            if key == EVENTS_KEY:
                written += write_events(out, source, copies)
            else:
                written += out.write(_ENCODER.encode(value))
        written += out.write(b"}")
    tmp.replace(path)
    return written


def make_big_trace(source_path: Path, out_path: Path, *, target_mb: float | None, copies: int | None) -> int:
    """Library entry point (used by bench/ingest.py); returns uncompressed bytes written."""
    source = load_source(source_path)
    count = copies if copies is not None else copies_for_target(source, target_mb or 0.0)
    written = write_trace(source, out_path, count)
    print(
        f"wrote {out_path}: {count} copies x {len(source.tiled_events)} events "
        f"(+{len(source.metadata_events)} metadata events), {written / MB:.1f} MB uncompressed JSON, "
        f"{out_path.stat().st_size / MB:.1f} MB on disk "
        f"(copy period {source.period_us} us, id stride {source.id_stride})",
        flush=True,
    )
    return written


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a real trace (.json or .json.gz)")
    parser.add_argument("out", type=Path, help="output trace (.json, or .json.gz to compress)")
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--target-mb", type=float, help="approximate uncompressed size in MB (10^6 bytes)")
    size.add_argument("--copies", type=int, help="exact number of copies of the events")
    args = parser.parse_args(argv)
    if args.copies is not None and args.copies < 1:
        parser.error("--copies must be at least 1")
    if args.target_mb is not None and args.target_mb <= 0:
        parser.error("--target-mb must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    make_big_trace(args.source, args.out, target_mb=args.target_mb, copies=args.copies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
