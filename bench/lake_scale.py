"""The lakehouse warehouse at scale: 1, 100, 1,000 (and, behind --with-10000, 10,000) traces.

    DO_NOT_TRACK=1 .venv/bin/python bench/lake_scale.py                      # sizes 1, 100, 1000
    DO_NOT_TRACK=1 .venv/bin/python bench/lake_scale.py --with-10000         # hours on 2 cores
    DO_NOT_TRACK=1 .venv/bin/python bench/lake_scale.py --sizes 1,100 --batch 50

1. Tiles (bench/lake_tiles.py): distinct small traces cut from every real trace, cached in
   --tiles (default /tmp/scale/tiles). One tile of each source is ingested into a scratch warehouse
   first and its `trace_quality` verdicts printed: a tile with a `fail` verdict stops the bench.
2. One lakehouse warehouse (`--catalog local`) grows to each size in turn, by `tracelake ingest
   BATCH_DIR --jobs 1 --tag run=batchNNNN`, one call (one snapshot) per batch of --batch tiles; the
   first batch is the one trace of size 1. Each call: wall, CPU seconds (the child's user + system),
   peak RSS, and whether other processes disturbed it (bench/measure.py).
3. At each size:
   - files and bytes per table (ducklake_list_files), the data folder and the catalog file;
   - the cost of adding ONE more small trace: --probes times, each on a fresh copy of the warehouse
     (copied and re-pointed untimed), `tracelake ingest PROBE --jobs 1` with a different probe tile of
     similar size (the same probes at every size); the median is compared with size 1's; then once
     more through bench/lake_add_profile.py, which times each statement of the lake's write path;
   - cross-trace queries: cold = a new process that opens the warehouse and runs the query once
     (the query's own time, and the `tracelake sql` wall with start-up), warm = the median of
     --repeats more runs on that connection; `tracelake compare` between the H100 tiles of the
     second batch and those of the last (run=batch0002,platform=H100 run=batchNNNN,platform=H100)
     and `tracelake dashboard` (wall, new process each: they are commands, not queries);
   - `tracelake vacuum --keep-seconds 0` (timed), files per table after it, the queries and the
     add-one cost again. The warehouse keeps growing from the vacuumed state, as under a nightly vacuum.
4. Prints the tables and writes every figure as JSON (--results, default
   bench/out/lake_scale/results.json).

MB = 10^6 bytes. Work folders live under /tmp/scale/work (removed at the start of a run). The
results are written after every batch: --resume continues an interrupted run from its last batch.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lake_tiles import TileSet, make_tiles  # bench/ is sys.path[0]
from measure import MB, Child, child_env, run_child

REPO = Path(__file__).resolve().parent.parent
TRACELAKE = REPO / ".venv" / "bin" / "tracelake"
PYTHON = REPO / ".venv" / "bin" / "python"
WORK = Path("/tmp/scale/work")
# compare pools the traces of a run on one platform: a run of mixed platforms mixes hardware, and some
# tiles of other sources have no GPU work linked to a launch, which compare refuses
COMPARE_PLATFORM = "H100"
SLOW_COMMAND_S = 60.0  # a command this slow is timed once, not --repeats times

QUERIES = {
    "top ops across all traces (op_perf)":
        "select name, op_category, count(distinct trace_id) as traces, sum(operation_count) as ops, "
        "round(sum(kernel_time_sum_us) / 1e3, 3) as kernel_ms from op_perf where is_trace_platform "
        "group by all order by kernel_ms desc limit 20",
    "top kernels across all traces (kernels)":
        "select name, count(*) as launches, count(distinct trace_id) as traces, round(sum(dur_us) / 1e3, 3) as ms "
        "from kernels group by name order by ms desc limit 20",
    "category time per run (ops_summary_by_category x runs)":
        "select r.run, c.op_category, count(*) as traces, round(sum(c.total_direct_kernel_time_ms), 3) as ms "
        "from ops_summary_by_category c join runs r using (trace_id) group by all order by r.run, ms desc",
    "GPU time breakdown per run (runs)":
        "select run, count(*) as traces, round(sum(total_time_ms), 3) as total_ms, "
        "round(avg(computation_time_percent), 2) as compute_pct, round(avg(idle_time_percent), 2) as idle_pct "
        "from runs group by run order by run",
    "quality verdicts across traces (trace_quality)":
        "select check_name, verdict, count(*) as traces from trace_quality group by all order by all",
}


# ---- one lake of the bench ----------------------------------------------------------------------


def tracelake(*args: str | Path) -> list[str]:
    return [str(TRACELAKE), *map(str, args)]


def checked(child: Child, what: str) -> Child:
    if child.returncode != 0:
        raise SystemExit(child.failure(what))
    return child


def child_record(child: Child) -> dict[str, float | bool]:
    return {"wall_s": round(child.seconds, 4), "cpu_s": round(child.cpu_seconds, 4),
            "peak_rss_mb": round(child.peak_rss_mb, 1), "others_busy_share": round(child.others_busy_share, 3),
            "disturbed": child.disturbed}


def link_batch(folder: Path, tiles: list[Path]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for tile in tiles:
        (folder / tile.name).symlink_to(tile)
    return folder


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


FILES_SCRIPT = """
import json, sys
from pathlib import Path
from tracelake.lakehouse import LakeWarehouse
con = LakeWarehouse(Path(sys.argv[1])).connect_lake(read_only=True)
tables = con.execute("select table_schema, table_name from information_schema.tables where "
                     "table_catalog = current_database() and table_type = 'BASE TABLE' order by all").fetchall()
out = {}
for schema, name in tables:
    files, size, deletes = con.execute(
        "select count(*), coalesce(sum(data_file_size_bytes), 0), count(delete_file) "
        "from ducklake_list_files(current_database(), ?, schema => ?)", [name, schema]).fetchone()
    out[f"{schema}.{name}"] = {"files": files, "bytes": int(size), "delete_files": deletes}
snapshots = con.execute("select count(*) from ducklake_snapshots(current_database())").fetchone()[0]
print(json.dumps({"tables": out, "snapshots": snapshots}))
"""


def files_per_table(warehouse: Path) -> dict[str, Any]:
    """Files and bytes of every table (ducklake_list_files), the data folder, the catalog file."""
    done = subprocess.run([str(PYTHON), "-c", FILES_SCRIPT, str(warehouse)], capture_output=True, text=True,
                          env=child_env(), check=False)
    if done.returncode != 0:
        raise SystemExit(f"cannot list the files of {warehouse}: {done.stderr.strip()[-500:]}")
    listed: dict[str, Any] = json.loads(done.stdout)
    tables = listed["tables"]
    listed["total_files"] = sum(t["files"] for t in tables.values())
    listed["total_table_bytes"] = sum(t["bytes"] for t in tables.values())
    listed["data_folder_files"] = sum(1 for p in (warehouse / "lake").rglob("*") if p.is_file())
    listed["data_folder_bytes"] = tree_bytes(warehouse / "lake")
    listed["catalog_bytes"] = (warehouse / "warehouse.sqlite").stat().st_size
    return listed


# ---- adding one trace -----------------------------------------------------------------------------


def fresh_copy(warehouse: Path) -> Path:
    """A copy of `warehouse`, re-pointed at its own data files by one untimed command."""
    copy = WORK / "probe-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(warehouse, copy, symlinks=True)
    checked(run_child(tracelake("traces", "--warehouse", copy)), "tracelake traces on the copy")
    return copy


def add_one(warehouse: Path, probes: list[Path]) -> dict[str, Any]:
    """Each probe ingested alone into a fresh copy of `warehouse`, then the first probe once more
    through bench/lake_add_profile.py: where its time goes."""
    runs = []
    for n, probe in enumerate(probes):
        copy = fresh_copy(warehouse)
        child = checked(run_child(tracelake("ingest", probe, "--warehouse", copy, "--jobs", "1")),
                        f"ingest probe {probe.name}")
        runs.append({**child_record(child), "probe": probe.name, "summary": child.stderr.strip().splitlines()[-1:]})
        print(f"    add one #{n + 1}: {child.seconds:.2f} s", file=sys.stderr, flush=True)
    copy = fresh_copy(warehouse)
    profiled = checked(run_child([str(PYTHON), str(REPO / "bench" / "lake_add_profile.py"), str(copy), str(probes[0])]),
                       "profiled add")
    shutil.rmtree(copy, ignore_errors=True)
    return {"runs": runs, "median_wall_s": statistics.median(r["wall_s"] for r in runs),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in runs), "profile": json.loads(profiled.stdout)}


# ---- cross-trace queries --------------------------------------------------------------------------

QUERY_SCRIPT = """
import json, statistics, sys, time
from pathlib import Path
from tracelake.lakehouse import LakeWarehouse
warehouse, repeats, queries = Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
started = time.perf_counter()
con = LakeWarehouse(warehouse).connect_read_only()
opened = time.perf_counter() - started
out = {"open_s": opened, "queries": {}}
for label, sql in queries.items():
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        rows = con.execute(sql).fetchall()
        times.append(time.perf_counter() - t0)
    out["queries"][label] = {"rows": len(rows), "cold_s": times[0], "warm_s": statistics.median(times[1:]),
                             "warm_all_s": times[1:]}
print(json.dumps(out))
"""


def time_queries(warehouse: Path, repeats: int) -> dict[str, Any]:
    """Every query in one new process: its first run (cold) and the median of `repeats` more (warm)."""
    child = checked(run_child([str(PYTHON), "-c", QUERY_SCRIPT, str(warehouse), str(repeats), json.dumps(QUERIES)]),
                    "timing the queries")
    result: dict[str, Any] = json.loads(child.stdout)
    result["process"] = child_record(child)
    return result


def time_commands(warehouse: Path, baseline: str, candidate: str, repeats: int) -> dict[str, Any]:
    """`tracelake sql` per query, `compare` between two selectors and `dashboard`: wall of a new process each."""
    out: dict[str, Any] = {"sql_cli": {}}
    for label, sql in QUERIES.items():
        child = checked(run_child(tracelake("sql", sql, "--warehouse", warehouse, "--format", "json")), f"sql {label}")
        out["sql_cli"][label] = child_record(child)
    compares, verdict = [], {}
    for _ in range(repeats):
        child = run_child(tracelake("compare", baseline, candidate, "--warehouse", warehouse, "--format", "json"))
        compares.append(child_record(child))
        verdict = _compare_verdict(child)
        if child.returncode not in (0, 1):
            print(child.failure("tracelake compare"), file=sys.stderr, flush=True)
            break
    out["compare"] = {"runs": compares, "median_wall_s": statistics.median(c["wall_s"] for c in compares),
                      "baseline": baseline, "candidate": candidate, "verdict": verdict}
    dashboards = []
    for _ in range(repeats):
        target = WORK / "dashboard"
        shutil.rmtree(target, ignore_errors=True)
        child = checked(run_child(tracelake("dashboard", "--warehouse", warehouse, "--out", target)), "dashboard")
        dashboards.append(child_record(child))
        if child.seconds > SLOW_COMMAND_S:
            break
    out["dashboard"] = {"runs": dashboards, "median_wall_s": statistics.median(d["wall_s"] for d in dashboards)}
    return out


def _compare_verdict(child: Child) -> dict[str, Any]:
    try:
        report = json.loads(child.stdout)
    except json.JSONDecodeError:
        return {"exit": child.returncode, "note": child.stdout[-200:]}
    keep = {k: report.get(k) for k in ("verdict", "summary", "confidence", "warehouse_snapshot")}
    keep["samples"] = [report.get(side, {}).get("sample_count") for side in ("baseline", "candidate")]
    return {"exit": child.returncode, **keep}


# ---- the tiles' check -----------------------------------------------------------------------------


def check_tiles(tiles: TileSet) -> dict[str, Any]:
    """One tile of each source ingested into a scratch lake; its non-pass quality verdicts."""
    first: dict[str, Path] = {}
    for tile in tiles.bulk:
        first.setdefault(tile.name.rsplit("__", 1)[0], tile)
    folder = link_batch(WORK / "check-tiles", list(first.values()))
    warehouse = WORK / "check-wh"
    checked(run_child(tracelake("ingest", folder, "--warehouse", warehouse, "--catalog", "local", "--jobs", "1",
                                "--quiet")), "ingest the check tiles")
    sql = ("select t.file_name, q.check_name, q.verdict from trace_quality q join traces t using (trace_id) "
           "where q.verdict in ('warn', 'fail') order by all")
    child = checked(run_child(tracelake("sql", sql, "--warehouse", warehouse, "--format", "json")), "quality")
    rows = json.loads(child.stdout)
    counts = json.loads(checked(run_child(tracelake(
        "sql", "select count(*) as traces, (select count(*) from kernels) as kernels, "
        "(select count(*) from kernels where link_method = 'none') as unlinked from traces",
        "--warehouse", warehouse, "--format", "json")), "counts").stdout)[0]
    failed = [r for r in rows if r["verdict"] == "fail"]
    shutil.rmtree(warehouse, ignore_errors=True)
    return {"tiles": len(first), "non_pass": rows, "failed": failed, **counts}


# ---- the run --------------------------------------------------------------------------------------


@dataclass
class SizeResult:
    traces: int
    files_before_vacuum: dict[str, Any] = field(default_factory=dict)
    add_one: dict[str, Any] = field(default_factory=dict)
    queries: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, Any] = field(default_factory=dict)
    vacuum: dict[str, Any] = field(default_factory=dict)
    files_after_vacuum: dict[str, Any] = field(default_factory=dict)
    queries_after_vacuum: dict[str, Any] = field(default_factory=dict)
    add_one_after_vacuum: dict[str, Any] = field(default_factory=dict)


def batch_plan(sizes: list[int], batch: int) -> list[tuple[int, int]]:
    """[start, end) tile ranges: each size is reached exactly, in batches of at most `batch`."""
    ranges, start = [], 0
    for size in sizes:
        while start < size:
            end = min(start + batch, size)
            ranges.append((start, end))
            start = end
    return ranges


def ingest_batch(warehouse: Path, tiles: TileSet, number: int, start: int, end: int) -> dict[str, Any]:
    folder = link_batch(WORK / "batches" / f"batch{number:04d}", tiles.bulk[start:end])
    args = ["ingest", folder, "--warehouse", warehouse, "--jobs", "1", "--tag", f"run=batch{number:04d}"]
    if number == 1:
        args += ["--catalog", "local"]
    child = checked(run_child(tracelake(*args)), f"ingest batch {number}")
    json_bytes = sum(tiles.bulk_sizes[start:end])
    record = {**child_record(child), "batch": number, "traces": end - start, "warehouse_traces": end,
              "json_mb": json_bytes / MB, "summary": [line for line in child.stderr.splitlines() if " new, " in line]}
    record["traces_per_cpu_s"] = (end - start) / max(child.cpu_seconds, 1e-9)
    record["json_mb_per_cpu_s"] = json_bytes / MB / max(child.cpu_seconds, 1e-9)
    print(f"  batch {number}: {end - start} traces -> {end}, {child.seconds:.1f} s wall, {child.cpu_seconds:.1f} s CPU"
          + (" (disturbed)" if child.disturbed else ""), file=sys.stderr, flush=True)
    return record


def last_run_on(warehouse: Path, platform: str) -> str:
    """The run tag of the last batch holding a trace of `platform` (tiles come in source order: the
    last batch may hold none)."""
    child = checked(run_child(tracelake("sql", f"select max(run) as run from runs where platform = '{platform}'",
                                        "--warehouse", warehouse, "--format", "json")), "finding the last run")
    return str(json.loads(child.stdout)[0]["run"])


def measure_size(warehouse: Path, size: int, tiles: TileSet, batches: int, repeats: int) -> SizeResult:
    result = SizeResult(size)
    print(f"size {size}: files, add one, queries", file=sys.stderr, flush=True)
    result.files_before_vacuum = files_per_table(warehouse)
    result.add_one = add_one(warehouse, tiles.probes)
    result.queries = time_queries(warehouse, repeats)
    # the H100 tiles of the second batch against those of the last batch that has some; a
    # warehouse of one trace compares it with itself
    if batches >= 2:
        baseline = f"run=batch0002,platform={COMPARE_PLATFORM}"
        candidate = f"run={last_run_on(warehouse, COMPARE_PLATFORM)},platform={COMPARE_PLATFORM}"
    else:
        baseline = candidate = "run=batch0001"
    result.commands = time_commands(warehouse, baseline, candidate, 3)
    vacuum = checked(run_child(tracelake("vacuum", "--keep-seconds", "0", "--warehouse", warehouse)), "vacuum")
    result.vacuum = {**child_record(vacuum), "output": vacuum.stdout.strip().splitlines()}
    result.files_after_vacuum = files_per_table(warehouse)
    result.queries_after_vacuum = time_queries(warehouse, repeats)
    result.add_one_after_vacuum = add_one(warehouse, tiles.probes)
    return result


def _resumed(args: argparse.Namespace, warehouse: Path) -> dict[str, Any] | None:
    """The report of an interrupted run to continue (--resume): its warehouse must hold exactly the
    traces of its last recorded batch (a batch commits whole or not at all)."""
    if not args.resume or not args.results.exists() or not warehouse.exists():
        return None
    report: dict[str, Any] = json.loads(args.results.read_text())
    done = report["batches"][-1]["warehouse_traces"] if report.get("batches") else 0
    child = checked(run_child(tracelake("sql", "select count(*) as n from raw.trace_files", "--warehouse", warehouse,
                                        "--format", "json")), "counting the traces to resume")
    held = json.loads(child.stdout)[0]["n"]
    if held != done or report["batch"] != args.batch:
        raise SystemExit(f"cannot resume: {warehouse} holds {held} traces, the results' last batch ends at {done} "
                         f"(batch size {report['batch']}); run without --resume")
    report["sizes"] = sorted(set(args.sizes))
    report.setdefault("resumed", []).append({"at": time.strftime("%F %T"), "traces": done, "load": os.getloadavg()})
    return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(set(args.sizes))
    warehouse = WORK / "wh"
    report = _resumed(args, warehouse)
    tiles = make_tiles(args.tiles, sizes[-1], args.probes)
    if report is None:
        shutil.rmtree(WORK, ignore_errors=True)
        WORK.mkdir(parents=True)
        report = {"revision": _revision(), "cpus": os.cpu_count(), "batch": args.batch, "sizes": sizes,
                  "load_start": os.getloadavg(), "started": time.strftime("%F %T"),
                  "tiles_json_mb": tiles.bulk_json_bytes / MB, "probe_events": tiles.probe_events,
                  "batches": [], "at_size": []}
        report["tile_check"] = check_tiles(tiles)
        if report["tile_check"]["failed"]:
            raise SystemExit(f"tiles with a fail verdict: {report['tile_check']['failed']}")
    measured = {s["traces"] for s in report["at_size"]}
    for number, (start, end) in enumerate(batch_plan(sizes, args.batch), 1):
        if number > len(report["batches"]):
            shutil.rmtree(WORK / "batches" / f"batch{number:04d}", ignore_errors=True)
            report["batches"].append(ingest_batch(warehouse, tiles, number, start, end))
            _write(args.results, report)
        if end in sizes and end not in measured:  # a resumed run measures a size its batch reached
            report["at_size"].append(asdict(measure_size(warehouse, end, tiles, number, args.repeats)))
            measured.add(end)
            _write(args.results, report)
    report["tiles_json_mb"] = tiles.bulk_json_bytes / MB
    report["load_end"] = os.getloadavg()
    return report


def _revision() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "?"


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda text: [int(x) for x in text.split(",")], default=[1, 100, 1000],
                        help="warehouse sizes, comma-separated (default 1,100,1000)")
    parser.add_argument("--with-10000", action="store_true", help="add the 10,000-trace size (hours on 2 cores)")
    parser.add_argument("--batch", type=int, default=100, help="tiles per `tracelake ingest` call (default 100)")
    parser.add_argument("--probes", type=int, default=5, help="add-one measurements per size (default 5)")
    parser.add_argument("--repeats", type=int, default=5, help="warm runs per query (default 5)")
    parser.add_argument("--tiles", type=Path, default=Path("/tmp/scale/tiles"), help="tile cache folder")
    parser.add_argument("--resume", action="store_true",
                        help="continue the interrupted run whose results and warehouse (/tmp/scale/work) are there")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "out" / "lake_scale" / "results.json")
    args = parser.parse_args(argv)
    if args.with_10000:
        args.sizes = [*args.sizes, 10_000]
    if min(args.sizes) < 1 or args.batch < 1 or args.probes < 1 or args.repeats < 1:
        parser.error("sizes, --batch, --probes and --repeats must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["DO_NOT_TRACK"] = "1"
    report = run(args)
    _write(args.results, report)
    from lake_scale_report import print_report

    print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
