"""End-to-end `tracelake analyze` timing and peak memory, against TraceLens' perf-report figures.

Each run analyzes a trace into a fresh copy of a warmed-up warehouse (dbt already ran once, as
for any warehouse after its first trace), so the time is ingest + models + report for a new
trace. Prints medians over --repeats runs.

    .venv/bin/python bench/analyze.py                 # the MI300X resnet trace (17 MB)
    .venv/bin/python bench/analyze.py --big-mb 55     # plus a 55 MB trace tiled from it
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from make_big_trace import make_big_trace
from measure import MB, copy_warehouse, run_child

ROOT = Path(__file__).resolve().parent.parent
TRACELAKE = ROOT / ".venv" / "bin" / "tracelake"
RESNET = ROOT / "tests" / "data" / "traces" / "mi300" / "resnet_act_checkpoint.json.gz"
WARMUP = ROOT / "tests" / "data" / "traces" / "torch_compile_triton" / "trace.json.gz"
OUT_DIR = ROOT / "bench" / "out"
# TraceLens' full perf report on this machine class (issue figures): seconds, peak RSS MB
TRACELENS = {"resnet": (3.7, 356.0), "55mb": (7.5, 700.0)}


def analyze_once(trace: Path, warm: Path, work: Path) -> tuple[float, float]:
    warehouse = work / "wh"
    if warehouse.exists():
        shutil.rmtree(warehouse)
    copy_warehouse(str(TRACELAKE), warm, warehouse)
    child = run_child([str(TRACELAKE), "analyze", str(trace), "--warehouse", str(warehouse),
                       "--out", str(work / "out"), "--platform", "MI300X", "--quiet"])
    if child.returncode != 0:
        raise SystemExit(child.failure(f"analyze {trace.name}"))
    return child.seconds, child.peak_rss_mb


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big-mb", type=float, action="append", default=[])
    args = parser.parse_args(argv)
    cases = [("resnet", RESNET)]
    for target in args.big_mb:
        path = OUT_DIR / f"big_{target:g}mb.json"
        if not path.exists():
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            make_big_trace(RESNET, path, target_mb=target, copies=None)
        cases.append((f"{target:g}mb", path))
    with tempfile.TemporaryDirectory(prefix="tracelake-bench-") as tmp:
        work = Path(tmp)
        warm = work / "warm"
        child = run_child([str(TRACELAKE), "ingest", str(WARMUP), "--warehouse", str(warm), "--quiet"])
        if child.returncode != 0:
            raise SystemExit(child.failure("warm-up ingest"))
        print(f"{'trace':<10} {'MB':>7} {'analyze s':>10} {'min-max':>13} {'peak RSS MB':>12}  vs TraceLens (time, RSS)")
        for label, path in cases:
            runs = [analyze_once(path, warm, work) for _ in range(args.repeats)]
            seconds = statistics.median(r[0] for r in runs)
            rss = max(r[1] for r in runs)
            size = path.stat().st_size / MB
            reference = TRACELENS.get(label)
            ratio = (f"{seconds / reference[0]:.2f}x of {reference[0]} s, {rss / reference[1]:.2f}x of {reference[1]:.0f} MB"
                     if reference else "")
            spread = f"{min(r[0] for r in runs):.2f}-{max(r[0] for r in runs):.2f}"
            print(f"{label:<10} {size:>7.1f} {seconds:>10.2f} {spread:>13} {rss:>12.0f}  {ratio}")


if __name__ == "__main__":
    main(sys.argv[1:])
