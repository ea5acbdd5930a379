"""`--engine ray` when things fail: a bad trace, a worker that dies mid-task, a cluster that cannot
be reached or does not see the warehouse. Failed traces are named with their error, the others
commit, nothing of a failed trace is registered; refusals come before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import RAY_ENV, free_port, one_error_line, run_tracelake, start_head
from tests.conftest import TRACES
from tracelake.lakehouse import LakeWarehouse

GOOD = TRACES / "torch_compile_triton" / "trace.json.gz"
OTHER = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
VICTIM = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
REPO = Path(__file__).parents[2]


def _lake_state(warehouse: Path) -> tuple[list[str], dict[str, int]]:
    """The ledger's trace ids, and the rows per trace id of every raw table."""
    with LakeWarehouse(warehouse).connect_lake(read_only=True) as lake:
        ids = sorted(str(r[0]) for r in lake.execute("select trace_id from trace_model_updates").fetchall())
        tables = [str(r[0]) for r in lake.execute("select table_name from information_schema.tables where "
                                                   "table_catalog = current_database() and table_schema = 'raw'").fetchall()]
        rows: dict[str, int] = {}
        for table in tables:
            for trace_id, count in lake.execute(f"select trace_id, count(*) from raw.{table} group by 1").fetchall():
                rows[trace_id] = rows.get(trace_id, 0) + int(count)
    return ids, rows


def _trace_id(stdout: str, name: str) -> str:
    return next(line.split()[0] for line in stdout.splitlines() if f"  {name}  " in line)


def test_a_bad_trace_fails_by_name_and_the_others_commit(tmp_path: Path) -> None:
    """On a local Ray instance started by the command (no --ray-address)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(GOOD, folder / "good.json.gz")
    (folder / "broken.json.gz").write_bytes(GOOD.read_bytes()[:100])
    (folder / "notes.json").write_text(json.dumps([{"not": "a trace"}]))
    warehouse = tmp_path / "wh"
    result = run_tracelake("ingest", str(folder), "--warehouse", str(warehouse), "--catalog", "local",
                           "--engine", "ray", "--jobs", "2")
    assert result.returncode == 2, result.stderr
    assert "tracelake: error: " + str(folder / "broken.json.gz") + ": gzip data is truncated" in result.stderr
    assert "skipped" in result.stderr and "notes.json" in result.stderr  # a folder's other JSON, as --engine local says
    assert "Traceback" not in result.stderr + result.stdout
    assert "good.json.gz" in result.stdout
    ids, rows = _lake_state(warehouse)
    assert ids == [_trace_id(result.stdout, "good.json.gz")] == sorted(rows)
    assert not any((warehouse / "staging").iterdir())


@pytest.fixture(scope="module")
def crashing_cluster() -> Iterator[str]:
    """A cluster whose workers kill themselves (SIGKILL, no clean-up) when they stage a file named
    `victim.json.gz`: the worker's environment is the node's, set when the node starts."""
    temp = Path(tempfile.mkdtemp(prefix="tl-ray-", dir="/tmp"))
    head, address = start_head(temp, 2, {**RAY_ENV, "TRACELAKE_CRASH_AT": "ray-stage:victim.json.gz"})
    try:
        yield address
    finally:
        head.stop()
        shutil.rmtree(temp, ignore_errors=True)


def test_a_worker_that_dies_mid_task_fails_its_trace_and_loses_nothing(crashing_cluster: str, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    first = run_tracelake("ingest", str(OTHER), "--warehouse", str(warehouse), "--catalog", "local")
    assert first.returncode == 0, first.stderr
    committed_before = _lake_state(warehouse)
    folder = tmp_path / "batch"
    folder.mkdir()
    shutil.copy(VICTIM, folder / "victim.json.gz")
    shutil.copy(GOOD, folder / "good.json.gz")
    address = ["--engine", "ray", "--ray-address", crashing_cluster]

    result = run_tracelake("ingest", str(folder), "--warehouse", str(warehouse), *address)
    assert result.returncode == 2, result.stderr
    lost = [line for line in result.stderr.splitlines() if "victim.json.gz" in line]
    assert len(lost) == 1 and "the Ray worker staging it was lost (WorkerCrashedError" in lost[0], result.stderr
    assert "A worker died" not in result.stdout + result.stderr  # Ray's own message is not printed over the report
    ids, rows = _lake_state(warehouse)
    good_id = _trace_id(result.stdout, "good.json.gz")
    assert ids == sorted([*committed_before[0], good_id]) == sorted(rows)  # the victim: no row in any table
    assert all(rows[t] == n for t, n in committed_before[1].items())  # what was committed is whole
    assert not any((warehouse / "staging").iterdir())  # the dead worker's half-written files are gone

    retry = tmp_path / "retry" / "bert.json.gz"  # the same trace under a name that does not crash: ingested whole
    retry.parent.mkdir()
    shutil.copy(VICTIM, retry)
    again = run_tracelake("ingest", str(retry), "--warehouse", str(warehouse), *address)
    assert again.returncode == 0, again.stderr
    assert len(_lake_state(warehouse)[0]) == 3


def test_an_unreachable_ray_address_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    result = run_tracelake("ingest", str(GOOD), "--warehouse", str(warehouse), "--catalog", "local",
                           "--engine", "ray", "--ray-address", f"127.0.0.1:{free_port()}")
    line = one_error_line(result)
    assert "cannot reach the Ray cluster at 127.0.0.1:" in line and "Connection refused" in line
    assert not warehouse.exists()


def test_ray_address_without_engine_ray_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    line = one_error_line(run_tracelake("ingest", str(GOOD), "--warehouse", str(warehouse), "--ray-address",
                                        "127.0.0.1:6379"))
    assert "--ray-address names the cluster of --engine ray" in line
    assert not warehouse.exists()


def test_a_ray_address_that_is_not_host_and_port_is_one_line(tmp_path: Path) -> None:
    line = one_error_line(run_tracelake("ingest", str(GOOD), "--warehouse", str(tmp_path / "wh"), "--engine", "ray",
                                        "--ray-address", "head-node"))
    assert "is not HOST:PORT" in line
    assert not (tmp_path / "wh").exists()


@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None or os.geteuid() != 0,
                    reason="needs root, unshare and ip (namespaces)")
def test_a_node_that_cannot_see_the_warehouse_or_the_traces_is_refused_before_any_work(tmp_path: Path) -> None:
    shared, work = tmp_path / "shared", tmp_path / "work"
    shared.mkdir()
    work.mkdir()
    answer = subprocess.run(["unshare", "--net", "--", sys.executable, "-m", "tests.cluster.hidden_node", str(shared),
                             str(work)], capture_output=True, text=True, timeout=600, cwd=REPO,
                            env={**os.environ, "DO_NOT_TRACK": "1"})
    assert answer.returncode == 0, answer.stderr[-3000:]
    cases = json.loads(answer.stdout.strip().splitlines()[-1])

    hidden_warehouse = cases["warehouse on the hidden folder"]
    line = one_error_line(subprocess.CompletedProcess([], hidden_warehouse["returncode"], hidden_warehouse["stdout"],
                                                      hidden_warehouse["stderr"]))
    assert f"its folder {shared} is not the driver's" in line and "a file system every node of the cluster sees" in line
    assert "shared/wh" not in hidden_warehouse["files"]  # nothing written: not even the folder, nor the probe

    hidden_trace = cases["trace on the hidden folder"]
    line = one_error_line(subprocess.CompletedProcess([], hidden_trace["returncode"], hidden_trace["stdout"],
                                                      hidden_trace["stderr"]))
    assert "cannot see the trace " + str(shared / "cpu_mlp_training.json.gz") in line
    assert "work/wh" not in hidden_trace["files"]
    assert not any(".tracelake-ray-probe-" in f for f in hidden_warehouse["files"] + hidden_trace["files"])


def test_wrong_ray_credentials_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    import uuid

    temp = Path(tempfile.mkdtemp(prefix="tl-ray-", dir="/tmp"))
    head, address = start_head(temp, 1, {**RAY_ENV, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex})
    try:
        warehouse = tmp_path / "wh"
        result = run_tracelake("ingest", str(GOOD), "--warehouse", str(warehouse), "--catalog", "local",
                               "--engine", "ray", "--ray-address", address, env={"RAY_AUTH_TOKEN": uuid.uuid4().hex})
        line = one_error_line(result)
        assert f"the Ray cluster at {address} refused this driver's credentials" in line
        assert not warehouse.exists()
    finally:
        head.stop()
        shutil.rmtree(temp, ignore_errors=True)
