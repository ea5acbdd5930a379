"""Many distinct small traces cut from the real ones: the tiles of bench/lake_scale.py.

    .venv/bin/python bench/lake_tiles.py OUT_DIR --count 1000 [--probes 5]

Each source trace (the real traces of tests/data/traces and ../shared/traces, each content once) is cut
into time windows of its host timeline. A tile is one window written as its own Chrome-trace JSON:

- every top-level key of the source is kept as it is (deviceProperties, distributedInfo,
  baseTimeNanoseconds, runtime versions, ...), and every metadata event (ph M);
- host events (CPU ops, python frames, annotations, runtime/driver calls) whose whole duration lies in
  the window, and instant events inside it;
- every GPU event (kernel, memcpy, memset) launched by a kept runtime call (same `correlation`), where
  and whenever it ran, and the launch flows (ac2g / async_cpu_to_gpu) of those calls: a launch, its
  kernel and its flow are kept or dropped together. GPU events that no launch in the source names, GPU
  annotations and other flows (fwdbwd) are kept when they lie wholly in the window.

Windows are 1/2 to 1/4 of the source's host span, capped at about MAX_TILE_EVENTS events, at starts on
a grid of 1/32 of their length: a window that keeps exactly the events of an earlier one is
skipped, so every tile has its own content, hence its own trace id. Tiles are taken round-robin over
the sources (a source whose windows run out drops out), in a fixed order, so the first N tiles of a
bigger set are the N tiles of a smaller one. The probe tiles (the "add one trace" measurements) are
windows of one small source of one length, kept apart from the bulk tiles.

Files are cached: a tile already written is not written again.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIRS = (REPO / "tests" / "data" / "traces", REPO.parent.parent / "shared" / "traces", Path("/work/shared/traces"))
# Left out: a CPU-only trace has no GPU events, and graph-capture traces are the capture, not a workload.
EXCLUDED = ("cpu_only/", "capture_traces/", "graph_execution")
PROBE_SOURCE = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
PROBE_FRACTION = 0.5
FRACTIONS = (0.5, 0.4, 0.33, 0.25)
GRID_STEPS = 32  # window starts every 1/32 of the window's length
MAX_TILE_EVENTS = 8_000
MIN_TILE_EVENTS = 60
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu"})
FLOW_PHASES = frozenset({"s", "t", "f"})
GZIP_LEVEL = 1
SEED = 25

_ENCODER = msgspec.json.Encoder()

# event kinds
HOST, INSTANT, GPU, GPU_OTHER, LAUNCH_FLOW, OTHER_FLOW, META = range(7)


def _number(value: Any) -> float:
    return float(value) if type(value) in (int, float) else np.nan


def _kind(event: dict[str, Any]) -> int:
    phase, category = event.get("ph"), event.get("cat")
    if phase == "M":
        return META
    if phase in FLOW_PHASES:
        return LAUNCH_FLOW if category in LAUNCH_FLOW_CATEGORIES else OTHER_FLOW
    if category in GPU_CATEGORIES:
        return GPU
    if category == "gpu_user_annotation":
        return GPU_OTHER
    if phase == "X":
        return HOST
    return INSTANT


def _correlation(event: dict[str, Any], kind: int) -> int:
    if kind in (LAUNCH_FLOW, OTHER_FLOW):
        value = event.get("id")
    else:
        args = event.get("args")
        value = args.get("correlation") if isinstance(args, dict) else None
    return value if type(value) is int else -1


class Source:
    """One real trace, decoded once: its events as arrays the windows are cut from."""

    def __init__(self, path: Path, label: str) -> None:
        self.path, self.label = path, label
        data = path.read_bytes()
        top = msgspec.json.decode(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)
        events = [e for e in top.pop("traceEvents") if isinstance(e, dict)]
        self.top_level: dict[str, Any] = top
        self.encoded = [_ENCODER.encode(e) for e in events]
        self.kind = np.array([_kind(e) for e in events], dtype=np.int8)
        self.start = np.array([_number(e.get("ts")) for e in events])
        self.end = self.start + np.nan_to_num(np.array([_number(e.get("dur")) for e in events]))
        self.correlation = np.array([_correlation(e, k) for e, k in zip(events, self.kind)], dtype=np.int64)
        host = (self.kind == HOST) & ~np.isnan(self.start)
        # the profiler's own span event ('Trace', 'PyTorch Profiler') covers everything: it sets no window
        host &= np.array([e.get("cat") not in ("Trace",) and not str(e.get("name", "")).startswith("PyTorch Profiler")
                          for e in events])
        self.host = host
        self.span = (float(np.nanmin(self.start[host])), float(np.nanmax(self.end[host])))
        self.launched = np.isin(self.correlation, self.correlation[host & (self.correlation >= 0)])

    @property
    def events(self) -> int:
        return int((self.kind != META).sum())

    def select(self, t0: float, t1: float) -> np.ndarray:
        """The events of the window [t0, t1) (see the module docstring)."""
        kind, start, end = self.kind, self.start, self.end
        inside = (start >= t0) & (end <= t1)
        host = self.host & inside
        launches = np.unique(self.correlation[host & (self.correlation >= 0)])
        keep = host | (kind == META) | ((kind == INSTANT) & (start >= t0) & (start < t1))
        by_launch = np.isin(self.correlation, launches)
        keep |= (kind == GPU) & np.where(self.launched, by_launch, (start >= t0) & (start < t1))
        keep |= (kind == LAUNCH_FLOW) & by_launch
        keep |= (kind == GPU_OTHER) & inside
        keep |= (kind == OTHER_FLOW) & self._whole_flows(inside)
        return keep

    def _whole_flows(self, inside: np.ndarray) -> np.ndarray:
        """Flow events whose every member (same id) lies in the window."""
        flows = self.kind == OTHER_FLOW
        ids = self.correlation[flows]
        outside_ids = np.unique(ids[~inside[flows]])
        return flows & inside & ~np.isin(self.correlation, outside_ids)

    def encode(self, keep: np.ndarray) -> bytes:
        events = b",".join(self.encoded[i] for i in np.flatnonzero(keep))
        head = _ENCODER.encode(self.top_level)
        return head[:-1] + (b"," if len(head) > 2 else b"") + b'"traceEvents":[' + events + b"]}"


@dataclass(frozen=True)
class Tile:
    source: str
    start_us: float
    length_us: float
    events: int
    body: bytes = b""

    @cached_property
    def name(self) -> str:
        digest = hashlib.sha256(self.body).hexdigest()[:10]
        stem = self.source.removesuffix(".json.gz").replace("/", "__")
        return f"{stem}__{digest}.json.gz"


def windows(source: Source, fractions: tuple[float, ...], rng: random.Random) -> Iterator[Tile]:
    """The source's distinct windows, in a shuffled order (every length and place mixed)."""
    t0, t1 = source.span
    span = t1 - t0
    cap = min(1.0, MAX_TILE_EVENTS / max(source.events, 1))
    lengths = sorted({min(f, f * cap / fractions[0]) * span for f in fractions}, reverse=True)
    starts = [(length, t0 + i * length / GRID_STEPS) for length in lengths
              for i in range(int((span - length) * GRID_STEPS / length) + 1)]
    rng.shuffle(starts)
    seen: set[bytes] = set()
    for length, begin in starts:
        keep = source.select(begin, begin + length)
        count = int((keep & (source.kind != META)).sum())
        if count < MIN_TILE_EVENTS or not (keep & (source.kind == GPU)).any():
            continue
        signature = hashlib.sha256(np.packbits(keep).tobytes()).digest()
        if signature in seen:
            continue
        seen.add(signature)
        yield Tile(source.label, begin, length, count, source.encode(keep))


def source_paths() -> list[tuple[Path, str]]:
    """Every real trace once (by content), labelled by its path under the traces folder."""
    found: dict[str, tuple[Path, str]] = {}
    for folder in SOURCE_DIRS:
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*.json.gz")):
            label = path.relative_to(folder).as_posix()
            if any(part in label for part in EXCLUDED) or "expected" in path.parts:
                continue
            found.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), (path, label))
    return sorted(found.values(), key=lambda item: item[1])


def bulk_tiles(count: int, exclude: set[str]) -> Iterator[Tile]:
    """`count` tiles, round-robin over the sources, none named in `exclude` (the probes)."""
    rng = random.Random(SEED)
    streams = [windows(Source(path, label), FRACTIONS, random.Random(rng.random())) for path, label in source_paths()]
    made = 0
    while streams and made < count:
        for stream in list(streams):
            tile = next(stream, None)
            if tile is None:
                streams.remove(stream)
                continue
            if tile.name in exclude:
                continue
            yield tile
            made += 1
            if made == count:
                return


def probe_tiles(count: int) -> list[Tile]:
    """`count` windows of one length of the small probe source: traces of similar size."""
    path = next(p for p, label in source_paths() if label == PROBE_SOURCE)
    tiles = list(windows(Source(path, PROBE_SOURCE), (PROBE_FRACTION,), random.Random(SEED)))
    if len(tiles) < count:
        raise SystemExit(f"{PROBE_SOURCE} gives only {len(tiles)} distinct probe windows, {count} asked")
    return tiles[:count]


def write_tile(tile: Tile, folder: Path) -> Path:
    path = folder / tile.name
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(gzip.compress(tile.body, compresslevel=GZIP_LEVEL, mtime=0))
        partial.replace(path)
    return path


@dataclass(frozen=True)
class TileSet:
    bulk: list[Path]  # in order: the first N make the warehouse of N traces
    probes: list[Path]
    bulk_sizes: list[int]  # uncompressed JSON bytes of each bulk tile
    probe_events: list[int]

    @property
    def bulk_json_bytes(self) -> int:
        return sum(self.bulk_sizes)


def make_tiles(out: Path, count: int, probes: int) -> TileSet:
    """The tile files under `out` (bulk/NN/name, probes/name), made when missing; an index file
    (tiles.json) remembers them so a later run asking no more reads no source."""
    index = out / "tiles.json"
    if index.exists():
        known = msgspec.json.decode(index.read_bytes())
        if len(known["bulk"]) >= count and len(known["probes"]) >= probes:
            bulk, probe_paths = known["bulk"][:count], known["probes"][:probes]
            if all((out / p).exists() for p in bulk + probe_paths):
                return TileSet([out / p for p in bulk], [out / p for p in probe_paths],
                               known["bulk_bytes"][:count], known["probe_events"][:probes])
    chosen = probe_tiles(probes)
    probe_paths = [write_tile(t, out / "probes").relative_to(out).as_posix() for t in chosen]
    bulk, sizes = [], []
    for n, tile in enumerate(bulk_tiles(count, {t.name for t in chosen})):
        bulk.append(write_tile(tile, out / "bulk" / f"{n // 1000:02d}").relative_to(out).as_posix())
        sizes.append(len(tile.body))
        if (n + 1) % 500 == 0:
            print(f"  {n + 1} tiles", file=sys.stderr, flush=True)
    if len(bulk) < count:
        print(f"note: the sources give only {len(bulk)} distinct tiles", file=sys.stderr)
    index.write_bytes(msgspec.json.encode({"bulk": bulk, "bulk_bytes": sizes, "probes": probe_paths,
                                           "probe_events": [t.events for t in chosen]}))
    return TileSet([out / p for p in bulk], [out / p for p in probe_paths], sizes, [t.events for t in chosen])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--probes", type=int, default=5)
    args = parser.parse_args(argv)
    tiles = make_tiles(args.out, args.count, args.probes)
    print(f"{len(tiles.bulk)} tiles ({tiles.bulk_json_bytes / 1e6:.1f} MB JSON), {len(tiles.probes)} probes "
          f"({min(tiles.probe_events)}-{max(tiles.probe_events)} events) under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
