"""Benchmark `tracelake ingest`: cold ingest time, MB/s, peak RSS, no-op re-ingest, one mart query.

    .venv/bin/python bench/ingest.py [TRACE_OR_FOLDER ...] [--repeats 3] [--big-mb 55 --big-mb 1024]

For every trace (default: each .json/.json.gz under ../shared/traces that is a profiler trace)
and for each big trace made by make_big_trace.py (once, into bench/out/), each repeat:

  1. copies a warmed-up warehouse (it holds one small trace and the compiled fast-path plan),
  2. times `tracelake ingest --quiet --jobs N TRACE` (N = --jobs, default all cores) as a child process: wall seconds until the
     marts are up to date, and the child's peak RSS (os.wait4),
  3. times `tracelake sql "select total_time_ms from gpu_timeline where trace_id = ..."`,
  4. times the same ingest again (a no-op: the trace is already there).

The table shows the median over the repeats. MB means 10^6 bytes (JSON size and RSS alike).
This is a benchmark, not a test: it only fails when tracelake itself fails.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
from make_big_trace import make_big_trace  # bench/ is sys.path[0] when this file runs
from measure import MB, Child, copy_warehouse, run_child

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = REPO.parent / "shared" / "traces"
# the repo's copies of the shared traces when ../shared is not beside the checkout (a fresh clone)
TRACES_DIR = SHARED_TRACES if SHARED_TRACES.is_dir() else REPO / "tests" / "data" / "traces"
BIG_SOURCE = TRACES_DIR / "mi300" / "resnet_act_checkpoint.json.gz"
WARMUP_SOURCE = TRACES_DIR / "torch_compile_triton" / "trace.json.gz"
OUT_DIR = REPO / "bench" / "out"
DEFAULT_TRACELAKE = REPO / ".venv" / "bin" / "tracelake"
TRACE_SUFFIXES = (".json", ".json.gz")
QUERY = "select total_time_ms from gpu_timeline where trace_id = '{trace_id}'"
MAX_PLAN_RETRIES = 3
LABEL_WIDTH = 60

# TraceLens' full perf report on this machine class (seconds, peak RSS MB, trace JSON MB).
TRACELENS_MB_PER_S = 7.0
QUERYABLE_LIMIT_S = 1.5
QUERYABLE_BIG_MB = 55.0
RSS_LIMIT_MB = 4_000.0  # 4 GB = 4 * 10^9 bytes (stricter than 4 GiB)
RSS_BIG_MB = 1024.0


@dataclass(frozen=True)
class Reference:
    label: str
    seconds: float
    rss_mb: float | None
    extrapolated: bool = False


FIXED_REFERENCES = {
    (TRACES_DIR / "b200" / "eager_trace.json.gz").resolve(): Reference("B200 eager, 14 MB", 2.3, 244.0),
    BIG_SOURCE.resolve(): Reference("MI300X resnet, 17 MB", 3.7, 356.0),
}
BIG_REFERENCES = {55.0: Reference("~55 MB trace", 7.5, 700.0)}


# ---- child processes ------------------------------------------------------------------------


INGEST_JOBS = {"jobs": os.cpu_count() or 1}  # set from --jobs


def ingest_cmd(tracelake: Path, trace: Path, warehouse: Path) -> list[str]:
    jobs = str(INGEST_JOBS["jobs"])
    return [str(tracelake), "ingest", str(trace), "--warehouse", str(warehouse), "--jobs", jobs, "--quiet"]


def query_cmd(tracelake: Path, trace_id: str, warehouse: Path) -> list[str]:
    sql = QUERY.format(trace_id=trace_id)
    return [str(tracelake), "sql", sql, "--warehouse", str(warehouse), "--format", "json"]


# ---- finding and making traces --------------------------------------------------------------


def read_json_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def is_trace(path: Path) -> bool:
    """A JSON object with a 'traceEvents' list (what `tracelake ingest` accepts)."""
    try:
        top = msgspec.json.decode(read_json_bytes(path), type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, OSError, EOFError):
        return False
    events = top.get("traceEvents")
    return events is not None and bytes(events).lstrip().startswith(b"[")


def json_bytes(path: Path) -> int:
    """Uncompressed JSON size, streaming through gzip when needed."""
    if not path.name.endswith(".gz"):
        return path.stat().st_size
    total = 0
    with gzip.open(path, "rb") as handle:
        while chunk := handle.read(8 << 20):
            total += len(chunk)
    return total


def find_traces(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if not file.name.endswith(TRACE_SUFFIXES):
                continue
            if is_trace(file):
                found.append(file)
            else:
                print(f"skipped {file}: not a profiler trace (no 'traceEvents' list)", file=sys.stderr)
    return found


def big_trace_path(target_mb: float) -> Path:
    return OUT_DIR / f"big_{target_mb:g}mb.json"


def ensure_big_trace(target_mb: float) -> Path:
    """Made once from BIG_SOURCE; delete bench/out/ to remake."""
    path = big_trace_path(target_mb)
    if path.exists():
        print(f"reusing {path} ({path.stat().st_size / MB:.1f} MB)", file=sys.stderr)
    else:
        make_big_trace(BIG_SOURCE, path, target_mb=target_mb, copies=None)
    return path


def ensure_warmup_trace() -> Path:
    """A re-encoded copy of a tiny real trace: its own trace id, never one of the measured files."""
    path = OUT_DIR / "warmup_trace.json"
    if not path.exists():
        make_big_trace(WARMUP_SOURCE, path, target_mb=None, copies=1)
    return path


# ---- one measured run -----------------------------------------------------------------------


def plan_stamp(warehouse: Path) -> tuple[int, int] | None:
    """Identity of the compiled fast-path plan; it changes when ingest fell back to a dbt run."""
    plan = warehouse / "dbt" / "plan.json"
    if not plan.exists():
        return None
    stat = plan.stat()
    return stat.st_mtime_ns, stat.st_size


def warm_up(tracelake: Path, warmup_trace: Path, folder: Path) -> Path:
    """A fresh warehouse with one small trace and the compiled plan, so timed ingests take the fast path."""
    shutil.rmtree(folder, ignore_errors=True)
    child = run_child(ingest_cmd(tracelake, warmup_trace, folder))
    if child.returncode != 0:
        raise SystemExit(child.failure("warm-up ingest"))
    if plan_stamp(folder) is None:
        raise SystemExit(f"warm-up ingest left no compiled plan in {folder / 'dbt'}")
    print(f"warmed up {folder} in {child.seconds:.2f} s", file=sys.stderr)
    return folder


@dataclass(frozen=True)
class Run:
    cold: Child
    fast_path: bool = True
    query: Child | None = None
    noop: Child | None = None
    trace_id: str | None = None
    total_time_ms: float | None = None
    error: str | None = None


def new_trace_id(stdout: str, trace: Path) -> str | None:
    """The id from the `ID  NAME  N events  Ts` line that ingest prints for a new trace."""
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == trace.name and parts[-1].endswith("s") and "events" in parts:
            return parts[0]
    return None


def query_total_ms(child: Child) -> float | None:
    try:
        rows = json.loads(child.stdout)
    except json.JSONDecodeError:
        return None
    if not rows or rows[0].get("total_time_ms") is None:
        return None
    return float(rows[0]["total_time_ms"])


def measure_once(tracelake: Path, trace: Path, warm: Path, folder: Path) -> Run:
    shutil.rmtree(folder, ignore_errors=True)
    copy_warehouse(str(tracelake), warm, folder)
    try:
        before = plan_stamp(folder)
        cold = run_child(ingest_cmd(tracelake, trace, folder))
        if cold.returncode != 0:
            return Run(cold, error=cold.failure("cold ingest"))
        fast = plan_stamp(folder) == before
        trace_id = new_trace_id(cold.stdout, trace)
        if trace_id is None:
            return Run(cold, fast, error=f"cold ingest did not report a new trace: {cold.stdout.strip()!r}")
        query = run_child(query_cmd(tracelake, trace_id, folder))
        total = query_total_ms(query)
        if query.returncode != 0 or total is None:
            return Run(cold, fast, query, trace_id=trace_id, error=query.failure("gpu_timeline query"))
        noop = run_child(ingest_cmd(tracelake, trace, folder))
        if noop.returncode != 0 or "already ingested" not in noop.stdout:
            return Run(cold, fast, query, noop, trace_id, total, noop.failure("no-op ingest"))
        return Run(cold, fast, query, noop, trace_id, total)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- one trace, R repeats -------------------------------------------------------------------


@dataclass
class TraceResult:
    label: str
    path: Path
    json_mb: float
    reference: Reference | None
    big_mb: float | None = None
    runs: list[Run] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def good(self) -> list[Run]:
        return [r for r in self.runs if r.error is None]

    def median(self, pick: Callable[[Run], float]) -> float | None:
        values = [pick(r) for r in self.good]
        return statistics.median(values) if values else None

    @property
    def cold_s(self) -> float | None:
        return self.median(lambda r: r.cold.seconds)

    @property
    def rss_mb(self) -> float | None:
        return self.median(lambda r: r.cold.peak_rss_mb)

    @property
    def max_rss_mb(self) -> float | None:
        values = [r.cold.peak_rss_mb for r in self.runs]
        return max(values) if values else None

    @property
    def noop_s(self) -> float | None:
        return self.median(lambda r: r.noop.seconds if r.noop else 0.0)

    @property
    def query_s(self) -> float | None:
        return self.median(lambda r: r.query.seconds if r.query else 0.0)

    @property
    def total_ms(self) -> float | None:
        return self.median(lambda r: r.total_time_ms or 0.0)


class Bench:
    """The warm warehouse and the measuring loop; re-warms when the compiled plan went stale."""

    def __init__(self, tracelake: Path, work: Path, warmup_trace: Path) -> None:
        self.tracelake = tracelake
        self.work = work
        self.warmup_trace = warmup_trace
        self.warm = warm_up(tracelake, warmup_trace, work / "warm")

    def measure(self, result: TraceResult, repeats: int) -> None:
        retries = 0
        while len(result.runs) < repeats:
            n = len(result.runs) + 1
            run = measure_once(self.tracelake, result.path, self.warm, self.work / "run")
            if run.error is None and not run.fast_path and retries < MAX_PLAN_RETRIES:
                retries += 1
                result.notes.append(
                    f"run {n} fell back to a full dbt run ({run.cold.seconds:.2f} s; the project changed "
                    "since warm-up), re-warmed and repeated it"
                )
                print(f"  {result.label}: run {n} took the dbt path; re-warming", file=sys.stderr)
                self.warm = warm_up(self.tracelake, self.warmup_trace, self.work / "warm")
                continue
            if run.error is None and not run.fast_path:
                result.notes.append(f"run {n} used a full dbt run (not the fast path)")
            result.runs.append(run)
            report_progress(result, run, n, repeats)
            if run.error is not None:
                result.notes.append(f"run {n}: {run.error}")


def report_progress(result: TraceResult, run: Run, n: int, repeats: int) -> None:
    status = "FAILED" if run.error else ("fast" if run.fast_path else "dbt")
    extra = ""
    if run.query and run.noop:
        extra = f", query {run.query.seconds:.2f} s, no-op {run.noop.seconds:.2f} s"
    print(
        f"  {result.label}: run {n}/{repeats} {status}: cold ingest {run.cold.seconds:.2f} s, "
        f"peak RSS {run.cold.peak_rss_mb:.0f} MB{extra}",
        file=sys.stderr,
        flush=True,
    )


# ---- printing -------------------------------------------------------------------------------


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def runs_cell(result: TraceResult) -> str:
    fast = sum(1 for r in result.good if r.fast_path)
    failed = len(result.runs) - len(result.good)
    cell = f"{len(result.good)}/{len(result.runs)} fast" if fast == len(result.good) else f"{fast} fast"
    return cell + (f", {failed} FAILED" if failed else "")


def table_rows(results: Sequence[TraceResult]) -> list[list[str]]:
    rows = [["trace", "JSON MB", "cold s", "cold min-max", "MB/s", "peak RSS MB", "no-op s", "query s",
             "gpu total ms", "runs"]]
    for r in results:
        colds = [run.cold.seconds for run in r.good]
        spread = f"{min(colds):.2f}-{max(colds):.2f}" if colds else "-"
        mbps = r.json_mb / r.cold_s if r.cold_s else None
        rows.append([r.label, f"{r.json_mb:.1f}", fmt(r.cold_s, ".2f"), spread, fmt(mbps, ".1f"),
                     fmt(r.rss_mb, ".0f"), fmt(r.noop_s, ".2f"), fmt(r.query_s, ".2f"),
                     fmt(r.total_ms, ".2f"), runs_cell(r)])
    return rows


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))]
        print("  ".join(cells).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))


def reference_for(result: TraceResult) -> Reference | None:
    if result.reference is not None:
        return result.reference
    if result.big_mb is None:
        return None
    seconds = result.json_mb / TRACELENS_MB_PER_S
    return Reference(f"{result.json_mb:.0f} MB trace, extrapolated at ~{TRACELENS_MB_PER_S:g} MB/s", seconds, None, True)


def print_comparison(results: Sequence[TraceResult]) -> None:
    print()
    print("vs TraceLens (full perf report, same machine class); ratio = TraceLake / TraceLens:")
    for result in results:
        ref = reference_for(result)
        if ref is None:
            continue
        tilde = "~" if ref.extrapolated else ""
        ref_text = f"{tilde}{ref.seconds:.1f} s" + (f" / {ref.rss_mb:.0f} MB" if ref.rss_mb else "")
        if result.cold_s is None or result.rss_mb is None:
            print(f"  {result.label} ({result.json_mb:.1f} MB): TraceLens {ref_text} ({ref.label}); TraceLake FAILED")
            continue
        ratio = f"time {result.cold_s / ref.seconds:.2f}x"
        if ref.rss_mb:
            ratio += f", RSS {result.rss_mb / ref.rss_mb:.2f}x"
        print(
            f"  {result.label} ({result.json_mb:.1f} MB): TraceLens {ref_text} ({ref.label}); "
            f"TraceLake {result.cold_s:.2f} s / {result.rss_mb:.0f} MB -> {ratio}"
        )


def print_checks(results: Sequence[TraceResult]) -> None:
    small = next((r for r in results if r.big_mb == QUERYABLE_BIG_MB), None)
    big = next((r for r in results if r.big_mb == RSS_BIG_MB), None)
    print()
    if small is None:
        print(f"check: {QUERYABLE_BIG_MB:g} MB trace queryable within {QUERYABLE_LIMIT_S} s: not run "
              f"(pass --big-mb {QUERYABLE_BIG_MB:g})")
    elif small.cold_s is None:
        print(f"check: {QUERYABLE_BIG_MB:g} MB trace queryable within {QUERYABLE_LIMIT_S} s: NO (ingest failed)")
    else:
        verdict = "YES" if small.cold_s <= QUERYABLE_LIMIT_S else "NO"
        with_query = small.cold_s + (small.query_s or 0.0)
        print(f"check: {QUERYABLE_BIG_MB:g} MB trace queryable within {QUERYABLE_LIMIT_S} s: {verdict} "
              f"(ingest until the marts answer: median {small.cold_s:.2f} s for {small.json_mb:.1f} MB; "
              f"plus the first query: {with_query:.2f} s)")
    if big is None:
        print(f"check: 1 GB trace within {RSS_LIMIT_MB / 1000:g} GB peak RSS: not run (pass --big-mb {RSS_BIG_MB:g})")
    elif big.max_rss_mb is None:
        print(f"check: 1 GB trace within {RSS_LIMIT_MB / 1000:g} GB peak RSS: not measured")
    else:
        failed = len(big.runs) - len(big.good)
        verdict = "YES" if big.max_rss_mb <= RSS_LIMIT_MB and not failed else "NO"
        print(f"check: 1 GB trace within {RSS_LIMIT_MB / 1000:g} GB peak RSS: {verdict} "
              f"(max over {len(big.runs)} runs: {big.max_rss_mb:.0f} MB for {big.json_mb:.1f} MB JSON"
              + (f"; {failed} run(s) failed" if failed else "") + ")")


def git_revision() -> str:
    try:
        done = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()


def print_report(results: Sequence[TraceResult], repeats: int, load: tuple[float, float], revision: str) -> None:
    print()
    print(f"tracelake ingest --jobs {INGEST_JOBS['jobs']} at {revision}, median of {repeats} runs, "
          "each into a fresh copy of a warmed-up warehouse")
    print(f"(cold s = wall time of `tracelake ingest` until the marts answer; MB = 10^6 bytes; "
          f"{os.cpu_count()} CPUs; load average {load[0]:.2f} at start, {load[1]:.2f} at end)")
    print()
    print_table(table_rows(results))
    notes = [(r.label, note) for r in results for note in r.notes]
    if notes:
        print()
        for label, note in notes:
            print(f"note: {label}: {note}")
    print_comparison(results)
    print_checks(results)


# ---- main -----------------------------------------------------------------------------------


def shorten(text: str, width: int = LABEL_WIDTH) -> str:
    if len(text) <= width:
        return text
    keep = width - 3
    return text[: keep // 2] + "..." + text[-(keep - keep // 2):]


def label_for(path: Path) -> str:
    for base in (TRACES_DIR, REPO):
        try:
            return shorten(str(path.resolve().relative_to(base.resolve())))
        except ValueError:
            continue
    return shorten(str(path))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="*", type=Path, help=f"traces or folders (default: {TRACES_DIR})")
    parser.add_argument("--repeats", type=int, default=3, help="runs per trace; the table shows medians")
    parser.add_argument("--big-mb", type=float, action="append", default=[],
                        help=f"also a trace of ~N MB tiled from {BIG_SOURCE.name} (repeatable)")
    parser.add_argument("--big-only", action="store_true", help="skip the default traces")
    parser.add_argument("--tracelake", type=Path, default=DEFAULT_TRACELAKE, help="the tracelake executable")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="`tracelake ingest --jobs` (default: all cores, as the CLI does)")
    args = parser.parse_args(argv)
    INGEST_JOBS["jobs"] = args.jobs
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args


def collect(args: argparse.Namespace) -> list[TraceResult]:
    results: list[TraceResult] = []
    if not args.big_only:
        for path in find_traces(args.traces or [TRACES_DIR]):
            ref = FIXED_REFERENCES.get(path.resolve())
            results.append(TraceResult(label_for(path), path, json_bytes(path) / MB, ref))
    for target in sorted(set(args.big_mb)):
        path = ensure_big_trace(target)
        results.append(TraceResult(label_for(path), path, json_bytes(path) / MB, BIG_REFERENCES.get(target), target))
    return results


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["DO_NOT_TRACK"] = "1"
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    results = collect(args)
    if not results:
        raise SystemExit("no traces to measure")
    load_start = os.getloadavg()[0]
    revision = git_revision()
    work = Path(tempfile.mkdtemp(prefix="work-", dir=OUT_DIR))
    try:
        bench = Bench(args.tracelake, work, ensure_warmup_trace())
        for result in results:
            print(f"{result.label} ({result.json_mb:.1f} MB)", file=sys.stderr, flush=True)
            bench.measure(result, args.repeats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_report(results, args.repeats, (load_start, os.getloadavg()[0]), revision)
    return 1 if any(r.error for result in results for r in result.runs) else 0


if __name__ == "__main__":
    sys.exit(main())
