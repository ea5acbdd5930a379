"""Bulk-warehouse benchmark: ingest ~100 traces, then time cross-trace queries (each under 1 s).

    .venv/bin/python bench/bulk.py [--traces 100] [--repeats 5] [--jobs 2] [--keep] [--skip-generate]

1. Generates N distinct traces (bench/bulk_traces.py) from the reference GPU traces in tests/data/traces into
   bench/out/bulk/<model>/<mode>/<platform>/<run>/<model>-<platform>-<run>.json.gz: run r of a
   source is shifted by r days, and its GPU events are re-timed: every kernel class (gemm,
   attention, conv, norm, ...) gets a small run-dependent noise factor, and some commits
   (3 nightly runs each) regress one class by 10-30 %, so the runs hold real regressions.
   Generation time is not part of any figure.
2. Ingests them into a fresh warehouse with one `tracelake ingest FOLDER --tag ...` call per
   folder (model, mode, platform, run and commit tags), and into a second fresh warehouse with
   one `tracelake ingest bench/out/bulk` call (no tags): wall time, per-trace median, traces/s,
   MB/s of uncompressed JSON and peak RSS of the children (os.wait4).
3. Reports the size of each warehouse (parquet/ and warehouse.duckdb) and its trace count.
4. Times cross-trace queries on the tagged warehouse: median of --repeats runs in process
   (duckdb, warehouse.duckdb opened read-only), and once through `tracelake sql` (wall time
   with start-up). Each median is checked against 1 s.

MB means 10^6 bytes. Warehouses live in bench/out/bulk-work-*/ (removed unless --keep).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from bulk_traces import BULK_DIR, NOISE_SIGMA, REPO, RUNS_PER_COMMIT, Planned, ensure_traces, plan  # bench/ is sys.path[0]
from measure import MB, Child, run_child

from ingest import fmt, git_revision, json_bytes, plan_stamp, print_table  # bench/ingest.py

OUT_DIR = REPO / "bench" / "out"
DEFAULT_TRACELAKE = REPO / ".venv" / "bin" / "tracelake"
QUERY_LIMIT_S = 1.0
TREND_CALLS = 10  # calls compared at the start and the end of the tagged ingest


# ---- ingesting ------------------------------------------------------------------------------


def ingest_cmd(tracelake: Path, paths: Iterable[Path], warehouse: Path, jobs: int,
               tags: dict[str, str] | None = None) -> list[str]:
    cmd = [str(tracelake), "ingest", *map(str, paths), "--warehouse", str(warehouse), "--jobs", str(jobs),
           "--catalog", "classic"]  # it measures the classic layout (bench/lake_scale.py: the lakehouse)
    for key, value in (tags or {}).items():
        cmd += ["--tag", f"{key}={value}"]
    return cmd


def new_count(child: Child) -> int:
    """Traces the call added: one `ID  NAME  N events  Ts` line each."""
    return sum(1 for line in child.stdout.splitlines() if line.split()[-2:-1] == ["events"])


def models_path(child: Child) -> str:
    found = re.search(r"\(models: (\w+)\)", child.stderr)
    return found.group(1) if found else "?"


@dataclass
class IngestResult:
    label: str
    calls: list[Child]
    traces: int  # new traces reported by the calls
    errors: list[str]
    notes: list[str]

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.calls)

    @property
    def peak_rss_mb(self) -> float:
        return max((c.peak_rss_mb for c in self.calls), default=0.0)


def ingest_tagged(tracelake: Path, plans: Sequence[Planned], warehouse: Path, jobs: int) -> IngestResult:
    """One call per folder, with that folder's tags, into a new warehouse."""
    result = IngestResult("tagged: one call per folder", [], 0, [], [])
    for n, planned in enumerate(plans, 1):
        before = plan_stamp(warehouse)
        child = run_child(ingest_cmd(tracelake, [planned.folder], warehouse, jobs, planned.tags))
        result.calls.append(child)
        if child.returncode != 0:
            result.errors.append(child.failure(f"ingest {planned.folder.relative_to(REPO)}"))
            print(result.errors[-1], file=sys.stderr, flush=True)
            if n == 1:
                result.notes.append("stopped: the first call, which makes the warehouse, failed")
                break
            continue
        result.traces += new_count(child)
        if n == 1:
            result.notes.append(f"call 1 made the warehouse (full dbt run): {child.seconds:.2f} s")
        elif models_path(child) != "fast" or plan_stamp(warehouse) != before:
            result.notes.append(f"call {n} took the dbt path ({child.seconds:.2f} s): the project's dbt "
                                "files changed during the run")
        if n % 10 == 0 or n == len(plans):
            print(f"  tagged ingest {n}/{len(plans)}: {result.seconds:.1f} s", file=sys.stderr, flush=True)
    if len(result.calls) > 2 * TREND_CALLS:
        first = statistics.median(c.seconds for c in result.calls[1:TREND_CALLS + 1])
        last = statistics.median(c.seconds for c in result.calls[-TREND_CALLS:])
        result.notes.append(f"median call of calls 2-{TREND_CALLS + 1}: {first:.2f} s, of the last {TREND_CALLS}: "
                            f"{last:.2f} s (does a call get slower as the warehouse grows?)")
    return result


def ingest_bulk(tracelake: Path, warehouse: Path, jobs: int) -> IngestResult:
    """One call on the whole folder, no tags, into a new warehouse."""
    child = run_child(ingest_cmd(tracelake, [BULK_DIR], warehouse, jobs))
    errors = [] if child.returncode == 0 else [child.failure(f"ingest {BULK_DIR.relative_to(REPO)}")]
    for error in errors:
        print(error, file=sys.stderr, flush=True)
    return IngestResult("bulk: one call, whole folder", [child], new_count(child), errors,
                        [f"bulk call models path: {models_path(child)}"])


# ---- warehouses -----------------------------------------------------------------------------


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass(frozen=True)
class WarehouseSize:
    traces: int | None
    tagged: int | None
    parquet_mb: float
    duckdb_mb: float
    dbt_mb: float


def warehouse_size(warehouse: Path) -> WarehouseSize:
    traces = tagged = None
    db = warehouse / "warehouse.duckdb"
    if db.exists():
        try:
            with duckdb.connect(str(db), read_only=True) as con:
                traces, tagged = con.execute(
                    "select count(*), count(*) filter (where model is not null) from runs").fetchone()
        except duckdb.Error as exc:
            print(f"cannot count the traces in {warehouse}: {exc}", file=sys.stderr)
    return WarehouseSize(traces, tagged, tree_bytes(warehouse / "parquet") / MB,
                         sum(tree_bytes(p) for p in warehouse.glob("warehouse.duckdb*")) / MB,
                         tree_bytes(warehouse / "dbt") / MB if (warehouse / "dbt").exists() else 0.0)


# ---- queries --------------------------------------------------------------------------------

REGRESSIONS_SQL = """
with category_runs as (
    select r.model, r.mode, r.platform, r.run, r.commit, c.op_category,
           c.total_direct_kernel_time_ms as ms
    from ops_summary_by_category c join runs r using (trace_id)
),
steps as (
    select *,
           lag(run) over w as previous_run,
           lag(ms) over w as previous_ms
    from category_runs
    window w as (partition by model, mode, platform, op_category order by run)
)
select model, mode, platform, op_category, previous_run, run, commit,
       round(previous_ms, 3) as previous_ms, round(ms, 3) as ms,
       round(ms - previous_ms, 3) as delta_ms, round(100 * (ms / previous_ms - 1), 1) as delta_pct
from steps
where previous_ms > 0 and ms > previous_ms
qualify row_number() over (partition by model, mode, platform order by ms - previous_ms desc) = 1
order by delta_pct desc
"""

QUERIES = (
    ("inference runs of bert-small on MI300X",
     "select * from runs where model = 'bert-small' and mode = 'inference' and platform = 'MI300X' order by run"),
    ("kernel time per trace (kernels x traces)",
     "select t.trace_id, t.file_name, sum(k.dur_us) / 1e3 as kernel_ms "
     "from kernels k join traces t using (trace_id) group by all order by kernel_ms desc"),
    ("category time per run, qwen1.5-0.5b-chat",
     "select r.platform, r.run, r.commit, c.op_category, c.total_direct_kernel_time_ms, c.percentage "
     "from ops_summary_by_category c join runs r using (trace_id) where r.model = 'qwen1.5-0.5b-chat' "
     "order by r.platform, r.run, c.total_direct_kernel_time_ms desc"),
    ("top 20 op signatures by kernel time",
     "select name, op_category, input_dims, input_type, count(distinct trace_id) as traces, "
     "sum(operation_count) as ops, sum(kernel_time_sum_us) / 1e3 as kernel_ms "
     "from op_perf where is_trace_platform group by all order by kernel_ms desc limit 20"),
    ("GPU time breakdown, by idle %",
     "select trace_id, model, platform, run, total_time_ms, computation_time_percent, "
     "exposed_comm_time_percent, exposed_memcpy_time_percent, idle_time_percent "
     "from runs order by idle_time_percent desc nulls last"),
    ("largest category regression per group", " ".join(REGRESSIONS_SQL.split())),
    ("kernel-name search: ilike '%gemm%'",
     "select name, count(*) as launches, count(distinct trace_id) as traces, sum(dur_us) / 1e3 as total_ms "
     "from kernels where name ilike '%gemm%' group by name order by total_ms desc"),
)


@dataclass
class QueryResult:
    label: str
    sql: str
    rows: int = 0
    seconds: list[float] = dataclasses.field(default_factory=list)
    cli: Child | None = None
    cli_rows: int | None = None
    error: str | None = None
    columns: list[str] = dataclasses.field(default_factory=list)
    result: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def passed(self) -> bool:
        return self.error is None and self.median is not None and self.median < QUERY_LIMIT_S


def time_queries(warehouse: Path, repeats: int) -> list[QueryResult]:
    results = [QueryResult(label, sql) for label, sql in QUERIES]
    try:
        con = duckdb.connect(str(warehouse / "warehouse.duckdb"), read_only=True)
    except duckdb.Error as exc:
        for q in results:
            q.error = f"cannot open the warehouse: {exc}"
        return results
    with con:
        for q in results:
            try:
                for _ in range(repeats):
                    started = time.perf_counter()
                    cursor = con.execute(q.sql)
                    rows = cursor.fetchall()
                    q.seconds.append(time.perf_counter() - started)
                q.rows, q.result = len(rows), rows
                q.columns = [d[0] for d in cursor.description]
            except duckdb.Error as exc:
                q.error = f"{type(exc).__name__}: {exc}"
    return results


def time_cli_queries(tracelake: Path, warehouse: Path, results: Sequence[QueryResult]) -> None:
    for q in results:
        if q.error:
            continue
        q.cli = run_child([str(tracelake), "sql", q.sql, "--warehouse", str(warehouse), "--format", "json"])
        if q.cli.returncode != 0:
            q.error = q.error or q.cli.failure("tracelake sql")
            continue
        try:
            q.cli_rows = len(json.loads(q.cli.stdout))
        except json.JSONDecodeError:
            q.error = q.error or f"tracelake sql printed no JSON: {q.cli.stdout[-300:]!r}"


# ---- report ---------------------------------------------------------------------------------


def ingest_rows(results: Sequence[IngestResult], json_mb: float) -> list[list[str]]:
    rows = [["ingest", "calls", "traces", "wall s", "per trace median s", "traces/s", "MB/s", "peak RSS MB",
             "failed"]]
    for r in results:
        per_trace = statistics.median(c.seconds for c in r.calls) if len(r.calls) > 1 else None
        if per_trace is None and r.traces:
            per_trace = r.seconds / r.traces
        rows.append([r.label, str(len(r.calls)), str(r.traces), f"{r.seconds:.1f}", fmt(per_trace, ".2f"),
                     f"{r.traces / r.seconds:.2f}" if r.seconds else "-",
                     f"{json_mb / r.seconds:.1f}" if r.seconds and not r.errors else "-", f"{r.peak_rss_mb:.0f}",
                     str(len(r.errors))])
    return rows


def size_rows(sizes: Sequence[tuple[str, WarehouseSize]]) -> list[list[str]]:
    rows = [["warehouse", "traces", "with tags", "parquet/ MB", "warehouse.duckdb MB", "dbt/ MB"]]
    for label, s in sizes:
        rows.append([label, fmt(s.traces, "d"), fmt(s.tagged, "d"), f"{s.parquet_mb:.1f}", f"{s.duckdb_mb:.1f}",
                     f"{s.dbt_mb:.1f}"])
    return rows


def query_rows(results: Sequence[QueryResult], repeats: int) -> list[list[str]]:
    rows = [["query", "rows", f"median s ({repeats})", "first s", "min-max s", "CLI wall s", "< 1 s"]]
    for q in results:
        spread = f"{min(q.seconds):.3f}-{max(q.seconds):.3f}" if q.seconds else "-"
        rows.append([q.label, str(q.rows), fmt(q.median, ".3f"), fmt(q.seconds[0] if q.seconds else None, ".3f"),
                     spread, fmt(q.cli.seconds if q.cli else None, ".2f"), "PASS" if q.passed else "FAIL"])
    return rows


def print_regressions(results: Sequence[QueryResult], plans: Sequence[Planned]) -> None:
    q = next(r for r in results if r.sql == " ".join(REGRESSIONS_SQL.split()))
    if q.error or not q.result:
        return
    print()
    print("largest category regression per (model, mode, platform), found by the query:")
    keep = ["model", "platform", "op_category", "previous_run", "run", "commit", "previous_ms", "ms", "delta_pct"]
    index = [q.columns.index(c) for c in keep]
    print_table([keep] + [[fmt(row[i], "") for i in index] for row in q.result])
    planted = sorted({(p.source.model, p.source.platform, p.commit, p.regression) for p in plans
                      if p.regression is not None}, key=lambda x: (x[0], x[1]))
    listed = "; ".join(f"{m}/{pl} {c} {r.kernel_class} +{r.percent:g}%" for m, pl, c, r in planted)
    print(f"planted by the generator: {len(planted)} commit regressions of one kernel class against the baseline "
          f"(each commit spans {RUNS_PER_COMMIT} nights; every run also has +-{NOISE_SIGMA:.1%} noise per class)"
          + (f": {listed}" if listed else ""))


def print_report(*, plans: Sequence[Planned], json_mb: float, gzip_mb: float, jobs: int,
                 ingests: Sequence[IngestResult], sizes: Sequence[tuple[str, WarehouseSize]],
                 queries: Sequence[QueryResult], repeats: int, load: tuple[float, float], revision: str) -> None:
    sources = len({p.source for p in plans})
    runs = sorted({sum(p.source == s for p in plans) for s in {p.source for p in plans}})
    print()
    print(f"bulk warehouse at {revision}: {len(plans)} traces ({sources} sources x {runs[0]}-{runs[-1]} runs), "
          f"{json_mb:.1f} MB uncompressed JSON ({gzip_mb:.1f} MB gzip), tracelake ingest --jobs {jobs}")
    print(f"({os.cpu_count()} CPUs; load average {load[0]:.2f} at start, {load[1]:.2f} at end; MB = 10^6 bytes)")
    print()
    print_table(ingest_rows(ingests, json_mb))
    print("(per trace s: median call of the tagged ingest, one trace each; wall / traces for the bulk call)")
    for r in ingests:
        for note in r.notes:
            print(f"note: {r.label}: {note}")
    print()
    print_table(size_rows(sizes))
    print()
    print(f"cross-trace queries on the tagged warehouse: in-process duckdb (read-only), median of {repeats}; "
          "CLI wall = one `tracelake sql` run, start-up included")
    print_table(query_rows(queries, repeats))
    errors: dict[str, list[str]] = {}
    for q in queries:
        if q.error:
            errors.setdefault(q.error, []).append(q.label)
        elif q.cli_rows is not None and q.cli_rows != q.rows:
            print(f"note: {q.label}: the CLI returned {q.cli_rows} rows, in-process {q.rows}")
    for error, labels in errors.items():
        print(f"error: {'all queries' if len(labels) == len(queries) else ', '.join(labels)}: {error}")
    print_regressions(queries, plans)
    passed = sum(q.passed for q in queries)
    slowest = max(queries, key=lambda q: q.median or float("inf"))
    tagged, bulk = ingests
    print()
    print(f"summary: {passed}/{len(queries)} queries under {QUERY_LIMIT_S:g} s "
          f"(slowest: {slowest.label}, median {fmt(slowest.median, '.3f')} s); "
          f"{tagged.traces}/{len(plans)} traces ingested in {tagged.seconds:.1f} s with tags "
          f"({len(tagged.calls)} calls), {bulk.traces}/{len(plans)} in {bulk.seconds:.1f} s in one bulk call; "
          + ("all ingests succeeded" if not (tagged.errors or bulk.errors) else
             f"{len(tagged.errors) + len(bulk.errors)} ingest call(s) FAILED"))


# ---- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100, help="traces to generate and ingest (default 100)")
    parser.add_argument("--repeats", type=int, default=5, help="runs per query; the table shows the median")
    parser.add_argument("--jobs", type=int, default=2, help="`tracelake ingest --jobs` (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the warehouses (bench/out/bulk-work-*)")
    parser.add_argument("--skip-generate", action="store_true",
                        help=f"reuse the traces already in {BULK_DIR.relative_to(REPO)}")
    parser.add_argument("--tracelake", type=Path, default=DEFAULT_TRACELAKE, help="the tracelake executable")
    args = parser.parse_args(argv)
    if args.traces < 1 or args.repeats < 1 or args.jobs < 1:
        parser.error("--traces, --repeats and --jobs must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["DO_NOT_TRACK"] = "1"
    tracelake = args.tracelake.resolve()
    plans = plan(args.traces)
    ensure_traces(plans, args.skip_generate)
    json_mb = sum(json_bytes(p.path) for p in plans) / MB
    gzip_mb = sum(p.path.stat().st_size for p in plans) / MB
    load_start = os.getloadavg()[0]
    revision = git_revision()
    work = Path(tempfile.mkdtemp(prefix="bulk-work-", dir=OUT_DIR))
    try:
        tagged_wh, bulk_wh = work / "tagged", work / "bulk"
        print(f"ingesting {len(plans)} traces ({json_mb:.0f} MB JSON), one call per folder, into {tagged_wh}",
              file=sys.stderr, flush=True)
        tagged = ingest_tagged(tracelake, plans, tagged_wh, args.jobs)
        print(f"ingesting {BULK_DIR} in one call into {bulk_wh}", file=sys.stderr, flush=True)
        bulk = ingest_bulk(tracelake, bulk_wh, args.jobs)
        sizes = [("tagged", warehouse_size(tagged_wh)), ("bulk", warehouse_size(bulk_wh))]
        print("timing queries", file=sys.stderr, flush=True)
        queries = time_queries(tagged_wh, args.repeats)
        time_cli_queries(tracelake, tagged_wh, queries)
    finally:
        if args.keep:
            print(f"kept the warehouses in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print_report(plans=plans, json_mb=json_mb, gzip_mb=gzip_mb, jobs=args.jobs, ingests=[tagged, bulk],
                 sizes=sizes, queries=queries, repeats=args.repeats, load=(load_start, os.getloadavg()[0]),
                 revision=revision)
    failed = tagged.errors or bulk.errors or any(q.error for q in queries)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
