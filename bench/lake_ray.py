"""Ingest on a local Ray cluster against forked processes, into a lakehouse warehouse.

    DO_NOT_TRACK=1 .venv/bin/python bench/lake_ray.py                 # 100 + 100 tiles, 3 repeats
    DO_NOT_TRACK=1 .venv/bin/python bench/lake_ray.py --traces 50 --repeats 5

Tiles come from bench/lake_tiles.py's cache (--tiles, default /tmp/scale/tiles; bench/lake_scale.py
makes them). A one-node Ray cluster is started with `ray start --head` on 127.0.0.1 with --cpus CPUs
(default: all cores) and stopped at the end. For each engine (`--engine local`, the default, and
`--engine ray --ray-address ADDR`), each repeat on a new warehouse:

1. `tracelake ingest FIRST_BATCH --jobs N`: --traces tiles into an empty lakehouse (the first build);
2. `tracelake ingest SECOND_BATCH --jobs N`: as many more into it (the incremental path: with Ray,
   each task also runs the incremental models over its trace and the driver inserts its rows);
3. `tracelake ingest PROBE`: one more tile (the cost of adding one trace).

Wall time is what a user waits. With Ray, the decoding runs in Ray's worker processes, not in the
`tracelake` process, so the child's CPU seconds under-count its work: they are printed for the
local engine only. The two engines' warehouses are then compared: the same traces, and the same
row count in every table (tests/cluster/test_ray_ingest.py compares every row).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from lake_scale import link_batch  # bench/ is sys.path[0]
from lake_tiles import make_tiles
from measure import child_env, run_child

REPO = Path(__file__).resolve().parent.parent
TRACELAKE = REPO / ".venv" / "bin" / "tracelake"
RAY = REPO / ".venv" / "bin" / "ray"
WORK = Path("/tmp/scale/ray-work")
COUNT_SQL = ("select table_schema || '.' || table_name as t from information_schema.tables "
             "where table_catalog = current_database() and table_type = 'BASE TABLE' order by 1")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_ray(cpus: int) -> str:
    port = free_port()
    subprocess.run([str(RAY), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                    "--num-cpus", str(cpus), "--include-dashboard", "false", "--temp-dir", "/tmp/tl-ray-bench"],
                   check=True, capture_output=True, env=child_env())
    return f"127.0.0.1:{port}"


def stop_ray() -> None:
    subprocess.run([str(RAY), "stop", "--force"], check=False, capture_output=True, env=child_env())


def ingest(warehouse: Path, source: Path, engine: list[str], jobs: int) -> dict[str, Any]:
    child = run_child([str(TRACELAKE), "ingest", str(source), "--warehouse", str(warehouse), "--quiet",
                       "--jobs", str(jobs), *engine])
    if child.returncode != 0:
        raise SystemExit(child.failure(f"ingest {source} {' '.join(engine)}"))
    return {"wall_s": round(child.seconds, 3), "cpu_s": round(child.cpu_seconds, 3), "disturbed": child.disturbed}


def table_counts(warehouse: Path) -> dict[str, int]:
    script = ("import json, sys\nfrom pathlib import Path\nfrom tracelake.lakehouse import LakeWarehouse\n"
              "con = LakeWarehouse(Path(sys.argv[1])).connect_lake(read_only=True)\n"
              f"tables = [r[0] for r in con.execute({COUNT_SQL!r}).fetchall()]\n"
              "print(json.dumps({t: con.execute(f'select count(*) from {t}').fetchone()[0] for t in tables}))")
    done = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c", script, str(warehouse)],
                          capture_output=True, text=True, check=True, env=child_env())
    counts: dict[str, int] = json.loads(done.stdout)
    return {t: n for t, n in counts.items() if not t.startswith("tracelake.")}


def run(args: argparse.Namespace) -> dict[str, Any]:
    tiles = make_tiles(args.tiles, 2 * args.traces, 1)
    first, second, probe = tiles.bulk[:args.traces], tiles.bulk[args.traces:], tiles.probes[0]
    shutil.rmtree(WORK, ignore_errors=True)
    batches = link_batch(WORK / "first", first), link_batch(WORK / "second", second), link_batch(WORK / "probe", [probe])
    address = start_ray(args.cpus)
    results: dict[str, Any] = {"traces_per_batch": args.traces, "cpus": args.cpus, "repeats": args.repeats}
    try:
        for name, engine in (("local", ["--engine", "local"]), ("ray", ["--engine", "ray", "--ray-address", address])):
            runs = []
            for repeat in range(args.repeats):
                warehouse = WORK / f"wh-{name}-{repeat}"
                runs.append({step: ingest(warehouse, batch, engine, args.cpus)
                             for step, batch in zip(("first", "second", "add_one"), batches, strict=True)})
                print(f"{name} #{repeat + 1}: " + ", ".join(f"{k} {v['wall_s']:.1f} s" for k, v in runs[-1].items()),
                      file=sys.stderr, flush=True)
            results[name] = {"runs": runs, "median_wall_s": {
                step: statistics.median(r[step]["wall_s"] for r in runs) for step in ("first", "second", "add_one")}}
        results["same_row_counts"] = table_counts(WORK / "wh-local-0") == table_counts(WORK / "wh-ray-0")
    finally:
        stop_ray()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100, help="tiles per batch (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="new warehouses per engine (default 3)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="Ray CPUs and --jobs (default: cores)")
    parser.add_argument("--tiles", type=Path, default=Path("/tmp/scale/tiles"), help="tile cache folder")
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "out" / "lake_ray" / "results.json")
    args = parser.parse_args()
    results = run(args)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{'engine':<7} {'first ' + str(args.traces):>10} {'next ' + str(args.traces):>10} {'add one':>8}  (median wall s)")
    for name in ("local", "ray"):
        medians = results[name]["median_wall_s"]
        print(f"{name:<7} {medians['first']:>10.2f} {medians['second']:>10.2f} {medians['add_one']:>8.2f}")
    print(f"same row count in every table: {results['same_row_counts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
