"""The bulk benchmark's traces (bench/bulk.py): N distinct runs generated from the reference GPU traces.

Run r of a source is shifted by r days, and its GPU events are re-timed: every kernel class (gemm,
attention, conv, norm, ...) gets a small run-dependent noise factor, and some commits (3 nightly runs
each) regress one class by 10-30 %, so the runs hold real regressions. They are written to
bench/out/bulk/<model>/<mode>/<platform>/<run>/<model>-<platform>-<run>.json.gz.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import random
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from make_big_trace import SourceTrace, is_number, load_source, tile_event, write_trace  # bench/ is sys.path[0]

REPO = Path(__file__).resolve().parent.parent
TRACES_DIR = REPO / "tests" / "data" / "traces"
BULK_DIR = REPO / "bench" / "out" / "bulk"
FIRST_NIGHT = datetime.date(2026, 11, 1)
DAY_US = 86_400 * 1_000_000
RUNS_PER_COMMIT = 3
REGRESSION_CHANCE = 0.4
REGRESSION_PCT = (10.0, 30.0)
NOISE_SIGMA = 0.015
GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
OVERLAP_EPS_US = 0.01  # source events closer than this count as back to back
STREAM_GAP_US = 0.002  # a delayed event starts this long after the one before it (float-safe)


# ---- what is generated ----------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    model: str
    mode: str  # the `mode` tag: training or inference (what the trace does)
    platform: str
    path: str  # under tests/data/traces
    regress: tuple[str, ...]  # kernel classes a commit may regress


SOURCES = (
    Source("bert-small", "inference", "H100", "h100/gaunernst_bert-small-uncased__1016001.json.gz",
           ("gemm", "attention", "norm")),
    Source("bert-small", "inference", "MI300X", "mi300/gaunernst_bert-small-uncased__1016001.json.gz",
           ("gemm", "attention", "norm")),
    Source("qwen1.5-0.5b-chat", "inference", "H100", "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
           ("gemm", "attention", "elementwise")),
    Source("qwen1.5-0.5b-chat", "inference", "MI300X", "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
           ("gemm", "attention", "elementwise")),
    Source("resnet", "training", "MI300X", "mi300/resnet_act_checkpoint.json.gz", ("conv", "norm", "elementwise")),
    Source("moe-mxfp4", "inference", "B200", "b200/eager_trace.json.gz", ("gemm", "norm", "elementwise")),
    # GPU-only (no CPU ops): batch-norm backward and weight-gradient kernels, so training
    Source("convnet", "training", "MI210", "mi210/gpu_only_trace/gpu_only_trace.json.gz",
           ("conv", "norm", "elementwise")),
    Source("compiled-block", "inference", "MI300X", "torch_compile_triton/trace.json.gz",
           ("gemm", "attention", "triton")),
)

# First match wins (so igemm is conv and vectorized_layer_norm is norm); memcpy/memset by category.
KERNEL_CLASSES = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in (
    ("comm", r"nccl|rccl|all_?reduce|multimem"),
    ("attention", r"attn|flash|fmha|attention"),
    ("conv", r"conv|igemm|winograd|batched_transpose|SubTensorOp"),
    ("gemm", r"gemm|Cijk_|cutlass|xmma|nvjet|bmm_|matmul"),
    ("norm", r"norm"),
    ("triton", r"^triton_"),
    ("elementwise", r"elementwise|vectorized|unroll"),
))


@cache
def kernel_class(category: str, name: str) -> str:
    if category != "kernel":
        return "memcpy"
    return next((cls for cls, pattern in KERNEL_CLASSES if pattern.search(name)), "other")


@dataclass(frozen=True)
class Regression:
    kernel_class: str
    percent: float


@dataclass(frozen=True)
class Planned:
    source: Source
    run_index: int

    @property
    def run(self) -> str:
        return (FIRST_NIGHT + datetime.timedelta(days=self.run_index)).isoformat()

    @property
    def commit_index(self) -> int:
        return self.run_index // RUNS_PER_COMMIT

    @property
    def commit(self) -> str:
        return hashlib.sha1(f"tracelake-bulk-commit-{self.commit_index}".encode()).hexdigest()[:8]

    @property
    def folder(self) -> Path:
        s = self.source
        return BULK_DIR / s.model / s.mode / s.platform / self.run

    @property
    def path(self) -> Path:
        return self.folder / f"{self.source.model}-{self.source.platform}-{self.run}.json.gz"

    @property
    def tags(self) -> dict[str, str]:
        s = self.source
        return {"model": s.model, "mode": s.mode, "platform": s.platform, "run": self.run, "commit": self.commit}

    @property
    def regression(self) -> Regression | None:
        """The regression this run's commit carries against the baseline (none on the first commit)."""
        s = self.source
        rng = random.Random(f"{s.model}/{s.platform}/commit-{self.commit_index}")
        if self.commit_index == 0 or rng.random() >= REGRESSION_CHANCE:
            return None
        return Regression(rng.choice(s.regress), round(rng.uniform(*REGRESSION_PCT), 1))

    def factor(self, cls: str) -> float:
        """Duration factor of one kernel class in this run: noise, times the commit's regression."""
        s = self.source
        noise = random.Random(f"{s.model}/{s.platform}/{self.run_index}/{cls}").gauss(1.0, NOISE_SIGMA)
        regression = self.regression
        if regression is not None and regression.kernel_class == cls:
            noise *= 1 + regression.percent / 100
        return noise


def plan(count: int) -> list[Planned]:
    """Chronological, like a nightly job: night r ingests run r of every source."""
    return [Planned(SOURCES[i % len(SOURCES)], i // len(SOURCES)) for i in range(count)]


# ---- generating -----------------------------------------------------------------------------


def is_gpu_event(event: dict[str, Any]) -> bool:
    return (event.get("ph") == "X" and str(event.get("cat", "")).lower() in GPU_CATEGORIES
            and is_number(event.get("ts")) and is_number(event.get("dur")))


def retime_stream(events: list[dict[str, Any]], planned: Planned) -> dict[float, float]:
    """Scale one GPU stream's durations in place. An event that started after the stream went idle
    starts at its own time or, when the (now longer) work before it has not ended, just after it;
    an event that overlapped the one before it in the source keeps its offset. Returns old ts ->
    new ts."""
    moved: dict[float, float] = {}
    delay = 0.0
    old_end = new_end = float("-inf")
    for event in sorted(events, key=lambda e: e["ts"]):
        ts, dur = event["ts"], event["dur"]
        if ts >= old_end - OVERLAP_EPS_US:
            new_ts = ts if ts >= new_end else round(new_end + STREAM_GAP_US, 3)
        else:
            new_ts = round(ts + delay, 3)
        delay = new_ts - ts
        new_dur = round(dur * planned.factor(kernel_class(str(event["cat"]).lower(), str(event.get("name", "")))), 3)
        old_end, new_end = max(old_end, ts + dur), max(new_end, new_ts + new_dur)
        event["ts"], event["dur"] = new_ts, new_dur
        moved[ts] = new_ts
    return moved


def run_events(source: SourceTrace, planned: Planned) -> list[dict[str, Any]]:
    """The source's events for one run: shifted by `run_index` days, then the GPU events re-timed
    (the ac2g flow ends that point at them follow)."""
    events = [tile_event(e, planned.run_index * DAY_US, 0) for e in source.tiled_events]
    streams: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for event in events:
        if is_gpu_event(event):
            streams.setdefault((event.get("pid"), event.get("tid")), []).append(event)
    moved = {stream: retime_stream(stream_events, planned) for stream, stream_events in streams.items()}
    for event in events:
        if event.get("ph") == "f" and event.get("cat") == "ac2g":
            new_ts = moved.get((event.get("pid"), event.get("tid")), {}).get(event.get("ts"))
            if new_ts is not None:
                event["ts"] = new_ts
    return events


def generate(plans: Sequence[Planned]) -> None:
    """Writes every planned trace (the folder is emptied first); one source loaded at a time."""
    shutil.rmtree(BULK_DIR, ignore_errors=True)
    started = time.perf_counter()
    for source in dict.fromkeys(p.source for p in plans):
        loaded = load_source(TRACES_DIR / source.path)
        for planned in (p for p in plans if p.source == source):
            run = dataclasses.replace(loaded, tiled_events=run_events(loaded, planned))
            planned.folder.mkdir(parents=True, exist_ok=True)
            write_trace(run, planned.path, copies=1)
        print(f"generated {source.model} {source.platform}: "
              f"{sum(p.source == source for p in plans)} runs ({time.perf_counter() - started:.0f} s)",
              file=sys.stderr, flush=True)


def trace_files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))}


def ensure_traces(plans: Sequence[Planned], skip_generate: bool) -> None:
    wanted = {p.path for p in plans}
    if skip_generate and BULK_DIR.is_dir():
        found = trace_files(BULK_DIR)
        if found != wanted:
            raise SystemExit(f"{BULK_DIR} holds {len(found)} trace files, not the {len(wanted)} planned "
                             f"({len(wanted - found)} missing, {len(found - wanted)} extra); "
                             "run without --skip-generate")
        print(f"reusing the {len(found)} traces in {BULK_DIR}", file=sys.stderr)
        return
    generate(plans)
