"""A real Ray cluster for the `--engine ray` tests: `ray start --head` on 127.0.0.1, started once per
session and stopped (by its process id) at the end; and the comparison of two lakehouse warehouses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tracelake.lakehouse import LakeWarehouse

RAY = Path(sys.executable).parent / "ray"
# A cluster of one node binds to the loopback address only (Ray's switch for single-host clusters),
# so no test traffic goes to another address of this machine; and Ray reports no usage.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
START_TIMEOUT_SECONDS = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class RayProcess:
    """One `ray start --block` (a head or a worker node): ending it ends the node's processes."""

    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_ray(args: list[str], log: Path, env: dict[str, str], prefix: list[str] | None = None) -> RayProcess:
    """`ray start --block ARGS` (behind `prefix`, e.g. `unshare`), once it says it runs."""
    with log.open("wb") as out:
        process = subprocess.Popen([*(prefix or []), str(RAY), "start", "--block", "--disable-usage-stats", *args],
                                   stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    node = RayProcess(process, log)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise RuntimeError(f"ray start failed: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    return node


def start_head(temp: Path, cpus: int, env: dict[str, str], host: str = "127.0.0.1") -> tuple[RayProcess, str]:
    port = free_port()
    head = start_ray(["--head", "--node-ip-address", host, "--port", str(port), "--num-cpus", str(cpus),
                      "--include-dashboard", "false", "--temp-dir", str(temp / "head")], temp / "head.log", env)
    return head, f"{host}:{port}"


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """The address of a real one-node Ray cluster (2 CPUs) on 127.0.0.1, for the session."""
    # Ray's own files under /tmp (a short path: its socket names must fit 107 bytes)
    temp = Path(tempfile.mkdtemp(prefix="tl-ray-", dir="/tmp"))
    head, address = start_head(temp, 2, RAY_ENV)
    try:
        yield address
    finally:
        if "ray" in sys.modules:  # a test that drove Ray in this process (the Python API) left no session open
            sys.modules["ray"].shutdown()
        head.stop()
        shutil.rmtree(temp, ignore_errors=True)


def run_tracelake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "DO_NOT_TRACK": "1", **RAY_ENV, **(env or {})})


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed (exit 2, nothing on stdout, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracelake: error: "), lines[0]
    assert result.stdout == ""
    return lines[0]


# ---- comparing two lakehouse warehouses ----------------------------------------------------------

# Columns that differ between any two ingests of the same traces, whatever the engine:
RUN_COLUMNS = {
    "ingested_at": "the wall-clock time of the ingest",
    "ingest_seconds": "how long decoding took, measured",
    "models_updated_at": "the wall-clock time of the model update",
    "parquet_committed_at": "the wall-clock time of the commit",
    "run_label": "a trace without a run tag is labelled with its ingest time (MM-DD HH:MM:SS)",
    "trace_label": "the run label (the ingest time, untagged) with the trace's rank or file name",
    # run_groups orders traces by (group, run tag, ingest time, rank, trace id): which rank of a job
    # or which untagged trace was staged first is a race between the workers, in either engine
    "trace_position": "the trace's place in ingest-time order",
    "run_position": "its run's first trace_position",
    "run_index": "the run's place in run_position order",
}
# DuckDB sums doubles in parallel, in whatever order its threads finish: two ingests of the same
# traces (two local ones too) differ in the last bits of aggregated doubles. Doubles are equal
# within this relative tolerance; everything else exactly.
DOUBLE_TOLERANCE = 1e-9


def public_relations(lake: duckdb.DuckDBPyConnection) -> list[str]:
    rows = lake.execute("select table_name from information_schema.tables where table_catalog = current_database() "
                        "and table_schema = 'main' order by 1").fetchall()
    return [str(r[0]) for r in rows]


def differences(first: Path, second: Path) -> dict[str, str]:
    """Per public relation (every table and view of schema main) of `first` whose rows (as sorted
    multisets, RUN_COLUMNS left out, doubles within DOUBLE_TOLERANCE) differ from `second`'s: how."""
    found: dict[str, str] = {}
    with LakeWarehouse(first).connect_lake(read_only=True) as one, LakeWarehouse(second).connect_lake(read_only=True) as other, \
            duckdb.connect() as con:
        relations = public_relations(one)
        assert relations == public_relations(other)
        for relation in relations:
            con.register("a_rows", one.execute(f'select * from "{relation}"').to_arrow_table())
            con.register("b_rows", other.execute(f'select * from "{relation}"').to_arrow_table())
            problem = compare_registered(con)
            if problem:
                found[relation] = problem
    return found


def compare_registered(con: duckdb.DuckDBPyConnection) -> str:
    columns = con.execute("select column_name, column_type from (describe a_rows)").fetchall()
    if columns != con.execute("select column_name, column_type from (describe b_rows)").fetchall():
        return "other columns"
    kept = [(name, kind) for name, kind in columns if name not in RUN_COLUMNS]
    doubles = [name for name, kind in kept if kind in ("DOUBLE", "FLOAT")]
    others = [name for name, kind in kept if name not in doubles]
    # every row numbered in the same order on both sides (doubles rounded for the order only), then
    # row n of one compared with row n of the other: a sorted-multiset comparison with a tolerance
    order = ", ".join([f'"{n}"::varchar' for n in others] + [f'round("{n}", 6)' for n in doubles]) or "1"
    numbered = "select *, row_number() over (order by {order}) as row_n from {side}"
    same = [f'a."{n}" is not distinct from b."{n}"' for n in others] + [
        f'(a."{n}" is not distinct from b."{n}" or abs(a."{n}" - b."{n}") <= {DOUBLE_TOLERANCE} * '
        f'greatest(abs(a."{n}"), abs(b."{n}")))' for n in doubles]
    counts = con.execute("select (select count(*) from a_rows), (select count(*) from b_rows)").fetchone()
    if counts is None or counts[0] != counts[1]:
        return f"row counts {counts}"
    row = con.execute(
        f"select count(*) from ({numbered.format(order=order, side='a_rows')}) a "
        f"full join ({numbered.format(order=order, side='b_rows')}) b using (row_n) "
        f"where not ({' and '.join(same) or 'true'})").fetchone()
    return f"{row[0]} of {counts[0]} rows differ" if row and row[0] else ""
