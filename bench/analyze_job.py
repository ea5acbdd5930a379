"""Time and peak RSS of `tracelake analyze JOB_DIR` on multi-rank jobs, cold and warm.

Cold: a new warehouse (every rank decoded and modelled, the job report and every rank's report
written). Warm: the same command again on that warehouse (the ranks are already in it: only the
analysis runs). Medians of --repeats runs, with the spread; a run during which other processes
kept the machine busy is marked. Jobs: the real 8-rank DLRM job, and a synthetic job of --ranks
ranks built from a real rank by tests/jobs/synthetic_jobs.py (its ranks' collectives matched by
`Seq`/`Comms Id`). TraceLens' collective report is not installable here (its PyPI namesake is
another project), so its figure is its authors' published one (~45 s on 8 ranks,
`docs/how-to/collective-report.md`, TraceLens#599).

    DO_NOT_TRACK=1 .venv/bin/python bench/analyze_job.py [--repeats 3] [--ranks 64] [--job DIR]... [--synthetic-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import Child, run_child  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED_JOB = REPO.parent / "shared" / "traces" / "jobs" / "dlrm_8rank"
TRACELENS_8_RANK_SECONDS = 45.0  # TraceLens#599 / docs/how-to/collective-report.md: "~45 s" on 8 ranks


def tracelake_bin() -> str:
    return str(Path(sys.executable).with_name("tracelake"))


def build_synthetic(folder: Path, ranks: int) -> Path:
    out = folder / f"synthetic_{ranks}rank"
    subprocess.run([sys.executable, "-m", "tests.jobs.synthetic_jobs", str(out), "--ranks", str(ranks)],
                   cwd=REPO, check=True, env={**os.environ, "DO_NOT_TRACK": "1"})
    return out


def analyze(job: Path, warehouse: Path, out: Path, extra: list[str]) -> Child:
    child = run_child([tracelake_bin(), "analyze", str(job), "--warehouse", str(warehouse), "--out", str(out),
                       "--quiet", *extra])
    if child.returncode != 0:
        raise SystemExit(child.failure(f"tracelake analyze {job}"))
    return child


def step_seconds(out: Path) -> tuple[float, float]:
    """(the rank reports' seconds, the rest's: ingest, assignment, job findings, job report, CSVs) from
    the run's metadata/run.json: TraceLens' collective report compares with the rest."""
    steps = json.loads((out / "metadata" / "run.json").read_text())["steps"]
    ranks = sum(s["seconds"] for s in steps if s["step"] == "rank reports")
    rest = sum(s["seconds"] for s in steps if s["step"] != "rank reports" and not s["step"].startswith("rank "))
    return ranks, rest


def summary(label: str, runs: list[Child]) -> str:
    seconds = [r.seconds for r in runs]
    rss = [r.peak_rss_mb for r in runs]
    disturbed = sum(r.disturbed for r in runs)
    note = f"  ({disturbed} of {len(runs)} runs disturbed)" if disturbed else ""
    return (f"{label:<34} median {statistics.median(seconds):7.2f} s  (min {min(seconds):.2f}, max {max(seconds):.2f})"
            f"  peak RSS median {statistics.median(rss):6.0f} MB{note}")


def bench_job(job: Path, repeats: int, extra: list[str], work: Path) -> list[str]:
    cold: list[Child] = []
    warm: list[Child] = []
    splits: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}
    for run in range(repeats):
        warehouse = work / f"{job.name}-wh-{run}"
        out = work / f"{job.name}-out-{run}"
        cold.append(analyze(job, warehouse, out, extra))
        splits["cold"].append(step_seconds(out))
        warm.append(analyze(job, warehouse, out, [*extra, "--force"]))
        splits["warm"].append(step_seconds(out))
    ranks = len([p for p in job.iterdir() if p.name.endswith((".json", ".json.gz"))])
    lines = [summary(f"{job.name} ({ranks} ranks) cold", cold), summary(f"{job.name} ({ranks} ranks) warm", warm)]
    for state, parts in splits.items():
        lines.append(f"{'':<34} {state}: rank reports median {statistics.median(p[0] for p in parts):.2f} s, "
                     f"the rest (ingest, job findings, job report, CSVs) {statistics.median(p[1] for p in parts):.2f} s")
    if ranks == 8:
        lines.append(f"{'':<34} TraceLens collective report: ~{TRACELENS_8_RANK_SECONDS:.0f} s (published); "
                     f"ratio cold {statistics.median(r.seconds for r in cold) / TRACELENS_8_RANK_SECONDS:.2f}")
    return lines


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=64, help="ranks of the synthetic job (0: skip it)")
    parser.add_argument("--job", type=Path, action="append", default=[], help="a job folder (default: the DLRM job)")
    parser.add_argument("--synthetic-only", action="store_true", help="only the synthetic job")
    args = parser.parse_args(argv)
    extra: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tracelake-job-bench-") as scratch:
        work = Path(scratch)
        jobs = [] if args.synthetic_only else (args.job or [SHARED_JOB])
        if args.ranks:
            jobs.append(build_synthetic(work, args.ranks))
        for job in jobs:
            for line in bench_job(job, args.repeats, extra, work):
                print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
