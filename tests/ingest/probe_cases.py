"""The reliability probe's trace classes (issue 27), generated from a real trace with a seed.

Each class is a function `(rng, doc, raw, size) -> bytes` that changes a parsed real trace `doc`
(its bytes: `raw`) the way the probe did: GPU events under other categories or as B/E pairs,
string and epoch timestamps, 100 KB names, deep and same-time nesting of cpu ops, nested
`nn.Module` frames, a gzip bomb, metadata storms, many identical ops and many empty events.
`size` scales the class (events, nesting depth, bytes); None picks a small seeded size, for the
fuzz suite. The resource test (test_resource_limits.py) runs the probe's own sizes.
"""

from __future__ import annotations

import copy
import json
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GPU_CATEGORY_VARIANTS = ("kernel ", "cuda_kernel", "gpu_kernel", "Kernel", "KERNEL")
LONG_NAME_CHARS = 100_000  # the probe's 100 KB process / thread / event names
# Epoch microseconds of late 2023: traces of that time store absolute timestamps (~1.7e15 us).
EPOCH_US = 1_700_000_000_000_000


def _events(doc: Any) -> list[Any]:
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    return events if isinstance(events, list) else []


def _dicts(doc: Any) -> list[dict[str, Any]]:
    return [e for e in _events(doc) if isinstance(e, dict)]


def _dump(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # Python's json writes NaN / Infinity for non-finite floats


def _host_thread(doc: Any) -> tuple[Any, Any, float]:
    """The pid, tid and first start of the trace's busiest cpu-op thread (the first event's if none)."""
    timed = [e for e in _dicts(doc) if isinstance(e.get("ts"), (int, float)) and e.get("ph") == "X"]
    ops = [e for e in timed if e.get("cat") == "cpu_op"] or timed
    if not ops:
        return 1, 1, 1_000_000.0
    counts: dict[tuple[Any, Any], int] = {}
    for event in ops:
        key = (event.get("pid"), event.get("tid"))
        counts[key] = counts.get(key, 0) + 1
    pid, tid = max(counts, key=lambda k: counts[k])
    return pid, tid, float(min(e["ts"] for e in ops))


def _cpu_op(name: str, pid: Any, tid: Any, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"External id": 0, "Record function id": 0}}


def _kernels(doc: Any) -> list[dict[str, Any]]:
    return [e for e in _dicts(doc) if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]


# ---- GPU events the decoder may not recognize ----

def gpu_category_variants(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """GPU events under `"kernel "`, `cuda_kernel`, `gpu_kernel`, ...: some of them or all."""
    kernels = _kernels(doc)
    share = size if size is not None else rng.choice((1, 5, len(kernels)))
    for event in rng.sample(kernels, min(share, len(kernels))):
        event["cat"] = rng.choice(GPU_CATEGORY_VARIANTS)
    return _dump(doc)


def gpu_begin_end(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """GPU events written as B/E pairs instead of complete (X) events."""
    events = _events(doc)
    kernels = [e for e in _kernels(doc) if isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
    share = size if size is not None else rng.choice((1, 5, len(kernels)))
    for event in rng.sample(kernels, min(share, len(kernels))):
        end = {k: v for k, v in event.items() if k not in ("args", "dur")}
        end.update(ph="E", ts=event["ts"] + event.pop("dur"))
        event["ph"] = "B"
        events.insert(rng.randint(0, len(events)), end)
    return _dump(doc)


# ---- timestamps ----

def string_timestamps(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`"ts": "1419247333072.495"` (and string durations) on some events or all of them."""
    timed = [e for e in _dicts(doc) if isinstance(e.get("ts"), (int, float))]
    share = size if size is not None else rng.choice((1, 20, len(timed)))
    for event in rng.sample(timed, min(share, len(timed))):
        event["ts"] = repr(event["ts"])
        if isinstance(event.get("dur"), (int, float)) and rng.random() < 0.5:
            event["dur"] = repr(event["dur"])
    return _dump(doc)


def epoch_timestamps(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """Every timestamp moved to absolute epoch microseconds (~1.7e15 us), keeping the sub-us digits."""
    timed = [e for e in _dicts(doc) if isinstance(e.get("ts"), (int, float))]
    if not timed:
        return raw
    shift = EPOCH_US + rng.randrange(10**9) - min(e["ts"] for e in timed)
    for event in timed:
        event["ts"] += shift
    return _dump(doc)


# ---- strings ----

def long_names(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """Process, thread and a few event names of `size` characters (the probe: 100 KB)."""
    chars = size if size is not None else rng.choice((1_000, 10_000, LONG_NAME_CHARS))
    pid, tid, ts = _host_thread(doc)
    text = "".join(rng.choice("abcdefghij") for _ in range(64)) * (chars // 64 + 1)
    events = _events(doc)
    events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": ts, "args": {"name": text[:chars]}})
    events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": ts, "args": {"name": text[1:chars + 1]}})
    for event in rng.sample(_dicts(doc), min(3, len(_dicts(doc)))):
        event["name"] = text[2:chars + 2]
    return _dump(doc)


def metadata_storm(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` metadata events renaming the host threads over and over (the probe: 100,000)."""
    count = size if size is not None else rng.choice((1_000, 10_000))
    pid, tid, ts = _host_thread(doc)
    events = _events(doc)
    for i in range(count):
        kind = "thread_name" if i % 4 else "process_name"
        events.append({"ph": "M", "name": kind, "pid": pid, "tid": tid if kind == "thread_name" else 0,
                       "ts": ts, "args": {"name": f"renamed thread {i}"}})
    return _dump(doc)


# ---- host nesting ----

def nested_ops(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` cpu ops each nested in the one before (the probe: 20,000 deep), on a host thread."""
    depth = size if size is not None else rng.choice((300, 1_000, 3_000))
    pid, tid, ts = _host_thread(doc)
    events = _events(doc)
    for level in range(depth):
        events.append(_cpu_op(f"aten::nested_{level % 7}", pid, tid, ts - depth + level, 2.0 * (depth - level)))
    return _dump(doc)


def same_time_ops(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` cpu ops with one start and one duration on one thread (the probe: 20,000)."""
    count = size if size is not None else rng.choice((300, 1_000, 3_000))
    pid, tid, ts = _host_thread(doc)
    _events(doc).extend(_cpu_op(f"aten::same_{i % 3}", pid, tid, ts - 10.0, 5.0) for i in range(count))
    return _dump(doc)


def nested_modules(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` nested `nn.Module` python frames, a cpu op at the top of each (the probe: 5,000)."""
    depth = size if size is not None else rng.choice((100, 300, 1_000))
    pid, tid, ts = _host_thread(doc)
    start = ts - 4.0 * depth - 10.0
    events = _events(doc)
    for level in range(depth):
        frame_ts = start + 2.0 * level
        events.append({"ph": "X", "cat": "python_function", "name": f"nn.Module: Block_{level}", "pid": pid,
                       "tid": tid, "ts": frame_ts, "dur": 4.0 * (depth - level) - 1.0,
                       "args": {"Python id": level + 1, "Python parent id": level}})
        events.append(_cpu_op("aten::linear", pid, tid, frame_ts + 0.25, 1.0))
    return _dump(doc)


def identical_ops(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` copies of one cpu op, same name, thread, start and duration (the probe: 3 M)."""
    count = size if size is not None else rng.choice((1_000, 5_000, 20_000))
    ops = [e for e in _dicts(doc) if e.get("cat") == "cpu_op" and isinstance(e.get("ts"), (int, float))]
    pid, tid, ts = _host_thread(doc)
    template = rng.choice(ops) if ops else _cpu_op("aten::add", pid, tid, ts, 1.0)
    _events(doc).extend([copy.deepcopy(template)] * count)  # one object, written `count` times
    return _dump(doc)


# ---- bytes ----

def empty_events(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """`size` empty events `{}` after the real ones (the probe: 30 M in 90 MB)."""
    count = size if size is not None else rng.choice((1_000, 100_000, 300_000))
    data = _dump(doc)
    head, tail = data.rsplit(b"]", 1) if b'"traceEvents"' in data else (data, b"")
    return head + b", {}" * count + b"]" + tail if tail else data


def gzip_bomb(rng: random.Random, doc: Any, raw: bytes, size: int | None = None) -> bytes:
    """A .json.gz of `size` bytes of whitespace around one event (the probe: 3.9 GiB in 4.1 MB).
    The caller writes it with the .json.gz suffix (the bytes are the gzip)."""
    whitespace = size if size is not None else rng.choice((1 << 20, 16 << 20))
    pid, tid, ts = _host_thread(doc)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: one gzip member
    parts = [compressor.compress(b'{"traceEvents": [' + _dump(_cpu_op("aten::bomb", pid, tid, ts, 1.0)))]
    chunk = b" " * (1 << 20)
    for _ in range(whitespace // len(chunk)):
        parts.append(compressor.compress(chunk))
    parts.append(compressor.compress(b"]}"))
    parts.append(compressor.flush())
    return b"".join(parts)


ProbeClass = Callable[[random.Random, Any, bytes, "int | None"], bytes]
PROBE_CLASSES: dict[str, ProbeClass] = {
    f.__name__: f for f in (gpu_category_variants, gpu_begin_end, string_timestamps, epoch_timestamps, long_names,
                            metadata_storm, nested_ops, same_time_ops, nested_modules, identical_ops, empty_events,
                            gzip_bomb)
}
GZIP_CLASSES = frozenset({"gzip_bomb"})


@dataclass(frozen=True)
class ProbeCase:
    label: str
    probe_class: str
    data: bytes
    suffix: str


def make_probe_case(probe_class: str, source_raw: bytes, size: int | None, seed: int) -> ProbeCase:
    """One case of `probe_class` made from the JSON bytes of a real trace."""
    rng = random.Random(f"{seed}:{probe_class}:{size}")
    data = PROBE_CLASSES[probe_class](rng, json.loads(source_raw), source_raw, size)
    suffix = ".json.gz" if probe_class in GZIP_CLASSES else ".json"
    return ProbeCase(f"{probe_class}-{size}", probe_class, data, suffix)
