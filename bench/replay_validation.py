"""How well the what-if replay (tracelake/analyzers/replay.py) reproduces and predicts real timelines.

1. Unchanged: every trace under ../shared/traces (tests/data/traces in a clone without them) is
   ingested and replayed with nothing changed; the replayed GPU span minus the measured one, and the
   largest |replayed - measured| start of a GPU event.
2. Step pairs: a trace with several profiler steps that run the same GPU events (same names in the
   same order per stream) is a real before/after pair - the kernels of step B took other times than
   step A's. Step A's dependency graph is replayed with each GPU event given the duration of its
   counterpart in step B (everything else as in step A), and the predicted span of step A's GPU work
   is compared with step B's measured one, beside the naive prediction (A's span plus the summed
   duration changes).

    DO_NOT_TRACK=1 .venv/bin/python bench/replay_validation.py [TRACE_OR_FOLDER ...]

REPLAY_WAREHOUSE=PATH keeps the warehouse there (and reuses it when it exists) instead of a
temporary one.

Writes bench/out/replay_validation.json and prints both tables.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

from tracelake.analyzers import replay
from tracelake.lakehouse import open_warehouse

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
OUT = ROOT / "bench" / "out" / "replay_validation.json"


def _traces(arguments: list[str]) -> list[Path]:
    roots = [Path(a) for a in arguments] or [SHARED if SHARED.is_dir() else ROOT / "tests" / "data" / "traces"]
    found: list[Path] = []
    for root in roots:
        found += [root] if root.is_file() else sorted(p for p in root.rglob("*.json.gz") if "expected" not in p.parts)
    return found


def _ingest(traces: list[Path], warehouse: Path) -> None:
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    for trace in traces:  # one by one: a folder of ranks would be taken as one job
        subprocess.run([str(ROOT / ".venv" / "bin" / "tracelake"), "ingest", str(trace), "--warehouse", str(warehouse),
                        "--quiet"], check=False, env=env, capture_output=True)


def _step_events(graph: replay.TimelineGraph, step: int) -> pl.DataFrame:
    events = graph.gpu.filter(pl.col("step_number") == step).sort("ts_us")
    return events.with_columns(ordinal=pl.int_range(pl.len()).over(["device", "stream"]))


def _step_pairs(graph: replay.TimelineGraph) -> list[dict[str, float | int]]:
    steps = sorted(s for s in graph.gpu["step_number"].unique().to_list() if s is not None)
    rows: list[dict[str, float | int]] = []
    for before, after in zip(steps, steps[1:], strict=False):
        a, b = _step_events(graph, before), _step_events(graph, after)
        keys = ["device", "stream", "ordinal"]
        if a.height != b.height or a.select(*keys, "name").sort(keys).rows() != b.select(*keys, "name").sort(keys).rows():
            continue  # not the same GPU work: no pair
        matched = a.join(b.select(*keys, pl.col("dur_us").alias("after_us")), on=keys)
        cuts = dict(zip(matched["event_idx"].to_list(), (matched["dur_us"] - matched["after_us"]).to_list(), strict=True))
        replayed = replay.replay(graph, replay.Change(cuts, {}))
        mine = replayed.starts.filter(pl.col("step_number") == before)
        measured_a = float(a["end_us"].max()) - float(a["ts_us"].min())  # type: ignore[arg-type]
        measured_b = float(b["end_us"].max()) - float(b["ts_us"].min())  # type: ignore[arg-type]
        predicted = float(mine["end_us"].max()) - float(mine["start_us"].min())  # type: ignore[arg-type]
        naive = measured_a - sum(cuts.values())
        rows.append({"step_a": before, "step_b": after, "events": a.height, "measured_a_ms": measured_a / 1e3,
                     "measured_b_ms": measured_b / 1e3, "replay_b_ms": predicted / 1e3, "naive_b_ms": naive / 1e3,
                     "replay_error_pct": 100.0 * (predicted - measured_b) / measured_b,
                     "naive_error_pct": 100.0 * (naive - measured_b) / measured_b})
    return rows


def main() -> None:
    traces = _traces(sys.argv[1:])
    kept = os.environ.get("REPLAY_WAREHOUSE")
    with tempfile.TemporaryDirectory() as folder:
        warehouse = Path(kept) if kept else Path(folder) / "wh"
        if not warehouse.exists():
            _ingest(traces, warehouse)
        db = open_warehouse(warehouse).connect_read_only()
        results = []
        for trace_id, source in db.execute("select trace_id, source_path from traces order by source_path").fetchall():
            graph = replay.load_graph(db, trace_id)
            span_error, worst = replay.reproduction_error(graph)
            unchanged = replay.replay(graph)
            results.append({"trace": str(Path(source).relative_to(SHARED) if SHARED in Path(source).parents else source),
                            "gpu_events": graph.gpu.height, "host_calls": graph.host.height,
                            "span_ms": graph.measured_span_us / 1e3, "span_error_us": span_error,
                            "worst_start_error_us": worst, "rounds": unchanged.iterations,
                            "step_pairs": _step_pairs(graph)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=1))
    print("| trace | GPU events | span ms | unchanged span error µs | worst start error µs | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['trace']} | {r['gpu_events']} | {r['span_ms']:.3f} | {r['span_error_us']:.4f} | "
              f"{r['worst_start_error_us']:.3f} | {r['rounds']} |")
    print("\n| trace | steps A -> B | GPU events | measured A ms | measured B ms | replay B ms (error) | naive B ms (error) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        for p in r["step_pairs"]:
            print(f"| {r['trace']} | {p['step_a']} -> {p['step_b']} | {p['events']} | {p['measured_a_ms']:.3f} | "
                  f"{p['measured_b_ms']:.3f} | {p['replay_b_ms']:.3f} ({p['replay_error_pct']:+.1f} %) | "
                  f"{p['naive_b_ms']:.3f} ({p['naive_error_pct']:+.1f} %) |")


if __name__ == "__main__":
    main()
