"""The tables of bench/lake_scale.py, printed from its results JSON.

    .venv/bin/python bench/lake_scale_report.py [bench/out/lake_scale/results.json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from ingest import print_table  # bench/ is sys.path[0]

QUERY_LIMIT_S = 1.0
ADD_ONE_LIMIT = 1.3


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f}"


def batch_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = [["batch", "traces", "warehouse after", "JSON MB", "wall s", "CPU s", "traces / CPU s", "JSON MB / CPU s",
             "peak RSS MB", "disturbed"]]
    for b in report["batches"]:
        rows.append([str(b["batch"]), str(b["traces"]), str(b["warehouse_traces"]), f"{b['json_mb']:.1f}",
                     f"{b['wall_s']:.1f}", f"{b['cpu_s']:.1f}", f"{b['traces_per_cpu_s']:.2f}",
                     f"{b['json_mb_per_cpu_s']:.2f}", f"{b['peak_rss_mb']:.0f}", "yes" if b["disturbed"] else ""])
    return rows


def trend_line(report: dict[str, Any]) -> str:
    full = [b for b in report["batches"] if b["traces"] == report["batch"]]
    if len(full) < 2:
        return "(fewer than two full batches: no trend)"
    head, tail = full[: max(1, len(full) // 4)], full[-max(1, len(full) // 4):]
    first = statistics.median(b["traces_per_cpu_s"] for b in head)
    last = statistics.median(b["traces_per_cpu_s"] for b in tail)
    first_mb = statistics.median(b["json_mb_per_cpu_s"] for b in head)
    last_mb = statistics.median(b["json_mb_per_cpu_s"] for b in tail)
    return (f"throughput of the full batches: {first:.2f} traces / CPU s ({first_mb:.2f} MB / CPU s) over the first "
            f"{len(head)}, {last:.2f} ({last_mb:.2f}) over the last {len(tail)}: x{last / first:.2f}")


def add_one_rows(report: dict[str, Any], key: str = "add_one") -> list[list[str]]:
    sizes = report["at_size"]
    base = sizes[0][key]["median_wall_s"] if sizes else 0.0
    base_cpu = sizes[0][key]["median_cpu_s"] if sizes else 0.0
    rows = [["warehouse traces", "add one: median wall s", "min-max s", "median CPU s", "x size 1 (wall)",
             "x size 1 (CPU)", f"<= {ADD_ONE_LIMIT}x", "disturbed runs"]]
    for s in sizes:
        runs = s[key]["runs"]
        walls = [r["wall_s"] for r in runs]
        ratio = s[key]["median_wall_s"] / base
        rows.append([str(s["traces"]), f"{s[key]['median_wall_s']:.2f}", f"{min(walls):.2f}-{max(walls):.2f}",
                     f"{s[key]['median_cpu_s']:.2f}", f"{ratio:.2f}",
                     f"{s[key]['median_cpu_s'] / base_cpu:.2f}", "PASS" if ratio <= ADD_ONE_LIMIT else "FAIL",
                     str(sum(r["disturbed"] for r in runs))])
    return rows


def profile_rows(report: dict[str, Any], top: int = 4) -> list[list[str]]:
    rows = [["warehouse traces", "total s", "raw inserts s", "models s", "commit s", "connects s (n)",
             "slowest statements"]]
    for s in report["at_size"]:
        p = s["add_one"]["profile"]
        slowest = ", ".join(f"{label} {sec:.2f}" for label, sec in p["statements"][:top])
        rows.append([str(s["traces"]), f"{p['total_s']:.2f}", f"{p['raw_inserts_s']:.2f}", f"{p['models_s']:.2f}",
                     f"{p['commit_s']:.2f}", f"{p['connects_s']:.2f} ({p['connects']})", slowest])
    return rows


def file_rows(report: dict[str, Any]) -> list[list[str]]:
    rows = [["warehouse traces", "tables", "files", "table MB", "data folder files", "data folder MB", "catalog MB",
             "snapshots", "after vacuum: files", "data folder files", "data folder MB", "snapshots", "vacuum s"]]
    for s in report["at_size"]:
        b, a = s["files_before_vacuum"], s["files_after_vacuum"]
        rows.append([str(s["traces"]), str(len(b["tables"])), str(b["total_files"]), _mb(b["total_table_bytes"]),
                     str(b["data_folder_files"]), _mb(b["data_folder_bytes"]), _mb(b["catalog_bytes"]),
                     str(b["snapshots"]), str(a["total_files"]), str(a["data_folder_files"]),
                     _mb(a["data_folder_bytes"]), str(a["snapshots"]), f"{s['vacuum']['wall_s']:.1f}"])
    return rows


def biggest_tables(report: dict[str, Any], count: int = 8) -> list[list[str]]:
    last = report["at_size"][-1]
    tables = last["files_before_vacuum"]["tables"]
    after = last["files_after_vacuum"]["tables"]
    names = sorted(tables, key=lambda n: -tables[n]["bytes"])[:count]
    rows = [[f"table at {last['traces']} traces", "files", "MB", "bytes / trace", "files after vacuum", "MB after"]]
    for name in names:
        t, v = tables[name], after.get(name, {"files": 0, "bytes": 0})
        rows.append([name, str(t["files"]), _mb(t["bytes"]), f"{t['bytes'] / last['traces']:,.0f}", str(v["files"]),
                     _mb(v["bytes"])])
    return rows


def query_rows(report: dict[str, Any]) -> list[list[str]]:
    sizes = report["at_size"]
    header = ["query"]
    for s in sizes:
        n = s["traces"]
        header += [f"{n}: cold s", f"{n}: warm s", f"{n}: CLI s", f"{n}: warm s vacuumed"]
    rows = [header]
    for label in sizes[0]["queries"]["queries"]:
        row = [label]
        for s in sizes:
            q, v = s["queries"]["queries"][label], s["queries_after_vacuum"]["queries"][label]
            row += [f"{q['cold_s']:.3f}", f"{q['warm_s']:.3f}", f"{s['commands']['sql_cli'][label]['wall_s']:.2f}",
                    f"{v['warm_s']:.3f}"]
        rows.append(row)
    for command in ("compare", "dashboard"):
        row = [f"tracelake {command} (wall, new process)"]
        for s in sizes:
            row += ["-", "-", f"{s['commands'][command]['median_wall_s']:.2f}", "-"]
        rows.append(row)
    return rows


def print_report(report: dict[str, Any]) -> None:
    check = report["tile_check"]
    print(f"lakehouse at scale at {report['revision']}: {report['cpus']} CPUs, load average "
          f"{report['load_start'][0]:.2f} at the start, {report.get('load_end', ['?'])[0]} at the end; "
          f"batches of {report['batch']}; {report['tiles_json_mb']:.0f} MB of tile JSON; MB = 10^6 bytes")
    print(f"tile check: {check['tiles']} tiles (one per source), {check['kernels']} kernels, {check['unlinked']} "
          f"unlinked; {len(check['non_pass'])} warn/fail verdicts, {len(check['failed'])} fail")
    print()
    print_table(batch_rows(report))
    print(trend_line(report))
    print()
    print(f"adding one small trace ({min(report['probe_events'])}-{max(report['probe_events'])} events; the same "
          "probes at every size, each into a fresh copy):")
    print_table(add_one_rows(report))
    print("the same after `tracelake vacuum` at that size:")
    print_table(add_one_rows(report, "add_one_after_vacuum"))
    print("where one profiled add's time goes (bench/lake_add_profile.py, before vacuum):")
    print_table(profile_rows(report))
    print()
    print_table(file_rows(report))
    print()
    print_table(biggest_tables(report))
    print()
    print("cross-trace queries: cold = first run in a new process, warm = median of the next runs; CLI = `tracelake "
          "sql` wall, start-up included")
    print_table(query_rows(report))
    slow = [(s["traces"], label) for s in report["at_size"] for label, q in s["queries"]["queries"].items()
            if q["warm_s"] >= QUERY_LIMIT_S]
    print(f"warm queries over {QUERY_LIMIT_S:g} s: {slow or 'none'}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else Path(__file__).resolve().parent / "out" / "lake_scale" / "results.json"
    print_report(json.loads(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
