"""`tracelake analyze` and `tracelake ingest` on real traces, cold and warm, against TraceLens;
then a scaling table on traces tiled from a real one.

    DO_NOT_TRACK=1 .venv/bin/python bench/analyze.py                          # the real traces, 3 runs each
    DO_NOT_TRACK=1 .venv/bin/python bench/analyze.py --scale 55 --scale 250 --scale 1024 --scale 4096
    DO_NOT_TRACK=1 .venv/bin/python bench/analyze.py --no-real --scale 55 --repeats 5

Cold: a new, empty warehouse folder per run (what a CI job or a first-time user has). Warm: a copy of
a warehouse that already holds one other trace (every later look). Each command runs as a child
process, as a user runs it, start-up included; its peak RSS is `os.wait4`'s (the largest resident
set of the command or of a child it waited for). One untimed analyze first loads the libraries into
the page cache, so "cold" means a new warehouse, not a cold disk.

TraceLens' perf-report time and peak RSS for the real traces come from
tests/data/expected/tracelens_times.csv (measured on this machine class). For tiled traces there is
no measurement: the reference is a least-squares line through those figures against uncompressed
JSON size, printed with the table; ratios against it are marked "(fit)".

Each figure is the median of --repeats runs, with the min-max spread. A run during which other
processes kept more than 15 % of the machine busy, or the disk kept the CPUs waiting for a quarter
of its time, is counted as disturbed (bench/measure.py) and the row says how many were.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from make_big_trace import make_big_trace
from measure import MB, Child, copy_warehouse, run_child

ROOT = Path(__file__).resolve().parent.parent
TRACELAKE = ROOT / ".venv" / "bin" / "tracelake"
SHARED = ROOT.parent / "shared" / "traces"
TRACES = SHARED if SHARED.is_dir() else ROOT / "tests" / "data" / "traces"
TRACELENS_TIMES = ROOT / "tests" / "data" / "expected" / "tracelens_times.csv"
WARMUP = ROOT / "tests" / "data" / "traces" / "torch_compile_triton" / "trace.json.gz"
# the tiling source: a real training step with its python frames, module calls and op args
TILE_SOURCE = TRACES / "h100" / "facebook_timesformer-base-finetuned-k400__1016002.json.gz"
OUT_DIR = ROOT / "bench" / "out"
BIG_RUN_MB = 500  # tiled traces from this size are analyzed --big-repeats times (default once)
# issue 29's targets (TraceLens ratios, sizes in MB of JSON, seconds, MB of RSS)
EVERY_TRACE_COLD_RATIO = 1 / 2
COLD_TARGET_RATIO, WARM_TARGET_RATIO, RSS_TARGET_RATIO = 1 / 4, 0.15, 1 / 2  # the 55 MB class
ONE_GB_SECONDS = 25.0
FOUR_GB_TIME_RATIO, FOUR_GB_RSS_TARGET = 4.4, 8000.0  # to the 1 GB time; MB
DECODE_MB_PER_S_PER_CORE = 100.0
STAGED_LINE = re.compile(r"\d+ events\s+([\d.]+)s")
INGEST_MB_PER_S_PER_CORE = 50.0


@dataclass(frozen=True)
class Reference:
    seconds: float
    rss_mb: float
    fitted: bool = False


@dataclass
class Figure:
    """Repeated runs of one command in one state (cold or warm)."""

    runs: list[Child] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def spread(self) -> str:
        return f"{min(r.seconds for r in self.runs):.2f}-{max(r.seconds for r in self.runs):.2f}"

    @property
    def rss_mb(self) -> float:
        return statistics.median(r.peak_rss_mb for r in self.runs)

    @property
    def disturbed(self) -> int:
        return sum(r.disturbed for r in self.runs)


@dataclass
class TraceBench:
    label: str
    path: Path
    json_mb: float
    reference: Reference
    figures: dict[str, Figure] = field(default_factory=dict)  # "analyze cold", "ingest warm", ...
    ingest_in_analyze_s: list[float] = field(default_factory=list)  # the analyze's own ingest step
    decode_s: float | None = None  # `ingest --jobs 1`'s staging time: read, decode, Parquet written


def json_mb(path: Path) -> float:
    if path.suffix != ".gz":
        return path.stat().st_size / MB
    with gzip.open(path, "rb") as handle:
        size = 0
        while chunk := handle.read(16 << 20):
            size += len(chunk)
    return size / MB


def tracelens_times() -> dict[str, Reference]:
    with TRACELENS_TIMES.open() as handle:
        return {row["trace"]: Reference(float(row["tracelens_perf_report_s"]), float(row["tracelens_peak_rss_mb"]))
                for row in csv.DictReader(handle)}


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of y on x."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


class Runner:
    def __init__(self, work: Path, repeats: int) -> None:
        self.work = work
        self.repeats = repeats
        self.warm = work / "warm"
        # the warm warehouse's trace is the compile trace re-encoded: its own trace id, so the compile
        # trace measured warm is a new trace there, not a no-op
        warmup = work / "warmup_trace.json"
        warmup.write_bytes(gzip.decompress(WARMUP.read_bytes()))
        child = run_child([str(TRACELAKE), "ingest", str(warmup), "--warehouse", str(self.warm), "--quiet"])
        if child.returncode != 0:
            raise SystemExit(child.failure("warm-up ingest"))

    def _warehouse(self, state: str) -> Path:
        folder = self.work / "wh"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(self.work / "out", ignore_errors=True)
        if state == "warm":
            copy_warehouse(str(TRACELAKE), self.warm, folder)
        return folder

    def _once(self, command: str, state: str, trace: Path) -> tuple[Child, float | None]:
        folder = self._warehouse(state)
        args = [str(TRACELAKE), command, str(trace), "--warehouse", str(folder), "--quiet"]
        if command == "analyze":
            args += ["--out", str(self.work / "out")]
        child = run_child(args)
        if child.returncode != 0:
            raise SystemExit(child.failure(f"{command} ({state}) {trace.name}"))
        ingest_s = None
        if command == "analyze":
            steps = json.loads((self.work / "out" / "metadata" / "run.json").read_text())["steps"]
            ingest_s = next(s["seconds"] for s in steps if s["step"] == "ingest")
        return child, ingest_s

    def measure_decode(self, bench: TraceBench) -> None:
        """The trace's staging time on one core (what `tracelake ingest` prints per trace: reading,
        decoding and writing its Parquet files, before the model update)."""
        folder = self._warehouse("cold")
        child = run_child([str(TRACELAKE), "ingest", str(bench.path), "--warehouse", str(folder), "--jobs", "1"])
        found = STAGED_LINE.search(child.stdout)
        if child.returncode != 0 or found is None:
            raise SystemExit(child.failure(f"ingest --jobs 1 {bench.path.name}"))
        bench.decode_s = float(found.group(1))
        print(f"  {bench.label}: decode on one core {bench.decode_s:.2f} s", file=sys.stderr, flush=True)

    def measure(self, bench: TraceBench, command: str, state: str, repeats: int | None = None) -> None:
        figure = bench.figures.setdefault(f"{command} {state}", Figure())
        for _ in range(repeats or self.repeats):
            child, ingest_s = self._once(command, state, bench.path)
            figure.runs.append(child)
            if ingest_s is not None:
                bench.ingest_in_analyze_s.append(ingest_s)
            print(f"  {bench.label}: {command} {state} {child.seconds:.2f} s, {child.peak_rss_mb:.0f} MB"
                  + (" (disturbed)" if child.disturbed else ""), file=sys.stderr, flush=True)


def ratio(value: float, reference: float, fitted: bool) -> str:
    return f"{value / reference:.2f}x" + (" (fit)" if fitted else "")


def disturbed_note(figures: Sequence[Figure]) -> str:
    count, total = sum(f.disturbed for f in figures), sum(len(f.runs) for f in figures)
    return f"{count}/{total}" if count else ""


def print_real(benches: Sequence[TraceBench]) -> None:
    print("\n### Real traces (median of runs, min-max; ratios are TraceLake / TraceLens)\n")
    print("| trace | JSON MB | TraceLens s / MB | analyze cold s | analyze warm s | peak RSS MB (cold) "
          "| cold / TL | warm / TL | RSS / TL | ingest cold s | ingest warm s | disturbed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in benches:
        f = b.figures
        ac, aw, ic, iw = f["analyze cold"], f["analyze warm"], f["ingest cold"], f["ingest warm"]
        ref = b.reference
        print(f"| {b.label} | {b.json_mb:.1f} | {ref.seconds:.2f} / {ref.rss_mb:.0f} "
              f"| {ac.seconds:.2f} ({ac.spread}) | {aw.seconds:.2f} ({aw.spread}) | {ac.rss_mb:.0f} "
              f"| {ratio(ac.seconds, ref.seconds, ref.fitted)} | {ratio(aw.seconds, ref.seconds, ref.fitted)} "
              f"| {ratio(ac.rss_mb, ref.rss_mb, ref.fitted)} | {ic.seconds:.2f} ({ic.spread}) "
              f"| {iw.seconds:.2f} ({iw.spread}) | {disturbed_note([ac, aw, ic, iw])} |")


def print_scaling(benches: Sequence[TraceBench], cores: int) -> None:
    print("\n### Scaling: traces tiled from the H100 TimeSformer trace (cold analyze)\n")
    print("| tiled trace | JSON MB | analyze s | s per GB | peak RSS MB | ingest step s | ingest MB/s per core "
          "| TraceLens (fit) s / MB | time / TL | RSS / TL | disturbed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for b in benches:
        a = b.figures["analyze cold"]
        ingest_s = statistics.median(b.ingest_in_analyze_s)
        ref = b.reference
        print(f"| {b.label} | {b.json_mb:.0f} | {a.seconds:.2f} ({a.spread}) | {a.seconds / b.json_mb * 1000:.1f} "
              f"| {max(r.peak_rss_mb for r in a.runs):.0f} | {ingest_s:.2f} | {b.json_mb / ingest_s / cores:.1f} "
              f"| {ref.seconds:.1f} / {ref.rss_mb:.0f} | {ratio(a.seconds, ref.seconds, True)} "
              f"| {ratio(max(r.peak_rss_mb for r in a.runs), ref.rss_mb, True)} | {disturbed_note([a])} |")


def print_targets(real: Sequence[TraceBench], tiled: Sequence[TraceBench], cores: int) -> None:
    print("\n### Targets (issue 29)\n")
    lines: list[tuple[str, bool, str]] = []
    for b in real:
        ac = b.figures["analyze cold"]
        lines.append((f"{b.label}: cold analyze <= 1/2 of TraceLens", ac.seconds <= EVERY_TRACE_COLD_RATIO * b.reference.seconds,
                      f"{ac.seconds:.2f} s vs {b.reference.seconds:.2f} s ({ac.seconds / b.reference.seconds:.2f}x)"))
    for b in [b for b in real + list(tiled) if 40 <= b.json_mb <= 70]:
        ac = b.figures["analyze cold"]
        lines.append((f"{b.label}: cold analyze <= 0.25x TraceLens", ac.seconds <= COLD_TARGET_RATIO * b.reference.seconds,
                      f"{ac.seconds:.2f} s vs {b.reference.seconds:.2f} s{' (fit)' if b.reference.fitted else ''}"))
        if "analyze warm" in b.figures:
            aw = b.figures["analyze warm"]
            lines.append((f"{b.label}: warm analyze <= 0.15x TraceLens", aw.seconds <= WARM_TARGET_RATIO * b.reference.seconds,
                          f"{aw.seconds:.2f} s"))
        lines.append((f"{b.label}: peak RSS <= 0.5x TraceLens", ac.rss_mb <= RSS_TARGET_RATIO * b.reference.rss_mb,
                      f"{ac.rss_mb:.0f} MB vs {b.reference.rss_mb:.0f} MB"))
    one_gb = next((b for b in tiled if 900 <= b.json_mb <= 1200), None)
    for b in tiled:
        a = b.figures["analyze cold"]
        rss = max(r.peak_rss_mb for r in a.runs)
        if b is one_gb:
            lines.append((f"{b.label}: analyzed in < 25 s", a.seconds < ONE_GB_SECONDS, f"{a.seconds:.1f} s, {rss:.0f} MB"))
        if b.json_mb >= 3500:
            lines.append((f"{b.label}: peak RSS < 8 GB", rss < FOUR_GB_RSS_TARGET, f"{rss:.0f} MB"))
            if one_gb is not None:
                ratio_to_1gb = a.seconds / one_gb.figures["analyze cold"].seconds
                lines.append((f"{b.label}: time <= 4.4x the 1 GB time", ratio_to_1gb <= FOUR_GB_TIME_RATIO,
                              f"{ratio_to_1gb:.2f}x"))
        ingest_s = statistics.median(b.ingest_in_analyze_s)
        rate = b.json_mb / ingest_s / cores
        lines.append((f"{b.label}: ingest >= 50 MB/s per core", rate >= INGEST_MB_PER_S_PER_CORE, f"{rate:.1f} MB/s per core"))
        if b.decode_s:
            decode = b.json_mb / b.decode_s
            lines.append((f"{b.label}: decode >= 100 MB/s per core", decode >= DECODE_MB_PER_S_PER_CORE,
                          f"{decode:.1f} MB/s on one core ({b.decode_s:.2f} s)"))
    for text, met, figure in lines:
        print(f"- {'MET' if met else 'NOT MET'}: {text}: {figure}")


def tiled_trace(target_mb: float) -> Path:
    path = OUT_DIR / f"tiled_timesformer_{target_mb:g}mb.json"
    if not path.exists():
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        make_big_trace(TILE_SOURCE, path, target_mb=target_mb, copies=None)
    return path


def git_revision() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big-repeats", type=int, default=1, help=f"runs of tiled traces of {BIG_RUN_MB} MB and more")
    parser.add_argument("--scale", type=float, action="append", default=[], help="MB of a tiled trace (repeatable)")
    parser.add_argument("--no-real", action="store_true", help="skip the real traces")
    parser.add_argument("--only", action="append", default=[], help="real traces whose path contains this")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    references = tracelens_times()
    points = [(json_mb(TRACES / name), ref.seconds) for name, ref in references.items() if (TRACES / name).exists()]
    rss_points = [(json_mb(TRACES / name), ref.rss_mb) for name, ref in references.items() if (TRACES / name).exists()]
    (t0, t1), (r0, r1) = fit(points), fit(rss_points)
    print(f"# bench/analyze.py at {git_revision()}: {cores} cores, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    print(f"TraceLens fit over {len(points)} real traces: {t0:.2f} s + {t1:.3f} s/MB, {r0:.0f} MB + {r1:.2f} MB RSS per MB")
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-", dir=OUT_DIR if OUT_DIR.is_dir() else None) as tmp:
        runner = Runner(Path(tmp), args.repeats)
        runner._once("analyze", "cold", WARMUP)  # untimed: libraries into the page cache
        real: list[TraceBench] = []
        if not args.no_real:
            for name, reference in references.items():
                path = TRACES / name
                if not path.exists() or (args.only and not any(o in name for o in args.only)):
                    continue
                bench = TraceBench(name.removesuffix(".json.gz"), path, json_mb(path), reference)
                for command in ("analyze", "ingest"):
                    for state in ("cold", "warm"):
                        runner.measure(bench, command, state)
                real.append(bench)
            print_real(real)
        tiled: list[TraceBench] = []
        for target in args.scale:
            path = tiled_trace(target)
            size = json_mb(path)
            bench = TraceBench(f"{target:g} MB", path, size, Reference(t0 + t1 * size, r0 + r1 * size, fitted=True))
            repeats = args.big_repeats if size >= BIG_RUN_MB else args.repeats
            runner.measure(bench, "analyze", "cold", repeats)
            if size < BIG_RUN_MB:
                runner.measure(bench, "analyze", "warm", repeats)
            runner.measure_decode(bench)
            tiled.append(bench)
        if tiled:
            print_scaling(tiled, cores)
        print_targets(real, tiled, cores)
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
