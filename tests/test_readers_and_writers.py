"""Readers never break a writer: a connection held open (a notebook's) or `sql` / `traces` running
beside an ingest leave every ingest succeeding; writers take turns, and one blocked for too long by
another gives up with one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tracelake.warehouse import Warehouse
from tracelake.writer_lock import WRITER_WAIT_ENV

pytestmark = pytest.mark.usefixtures("classic_layout")  # the classic layout's own machinery

FIRST = TRACES / "torch_compile_triton" / "trace.json.gz"
OTHERS = [TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz",
          TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz",
          TRACES / "cpu_only" / "cpu_mlp_training.json.gz",
          TRACES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"]

HOLD_A_CONNECTION = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
print(con.execute("select count(*) from traces").fetchone()[0], flush=True)
sys.stdin.readline()  # holds the connection until told
print(con.execute("select count(*) from traces").fetchone()[0], flush=True)
"""


@pytest.fixture(scope="module")
def with_first(built_once) -> Path:
    return built_once(FIRST)  # shared by the run: only copied (the `warehouse` fixture)


@pytest.fixture
def warehouse(with_first: Path, tmp_path: Path) -> Path:
    shutil.copytree(with_first, tmp_path / "wh")
    return tmp_path / "wh"


def _count(folder: Path) -> int:
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return len(json.loads(listed.stdout))


def test_an_ingest_beside_an_open_read_connection_succeeds(warehouse: Path) -> None:
    reader = subprocess.Popen([sys.executable, "-c", HOLD_A_CONNECTION, str(warehouse / "warehouse.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "1"
        ingested = run_cli("ingest", str(OTHERS[0]), "--warehouse", str(warehouse))
        assert ingested.returncode == 0, ingested.stderr
        analyzed = run_cli("analyze", str(OTHERS[1]), "--warehouse", str(warehouse), "--out",
                           str(warehouse.parent / "report"), "--quiet")
        assert analyzed.returncode == 0, analyzed.stderr
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "1"  # the reader kept the snapshot it opened
    finally:
        reader.communicate(timeout=60)
    assert _count(warehouse) == 3  # a new reader sees the new traces


def test_ingests_beside_readers_all_succeed(warehouse: Path) -> None:
    stop = time.monotonic() + 600

    def read_until_done(results: list[int]) -> None:
        while time.monotonic() < stop:
            results.append(run_cli("sql", "select count(*) from gpu_timeline", "--warehouse", str(warehouse)).returncode)

    reads: list[int] = []
    with ThreadPoolExecutor(max_workers=2) as readers:
        futures = [readers.submit(read_until_done, reads) for _ in range(2)]
        try:
            codes = [run_cli("ingest", str(trace), "--warehouse", str(warehouse), "--quiet").returncode
                     for trace in OTHERS]
        finally:
            stop = time.monotonic()
        for future in futures:
            future.result()
    assert codes == [0] * len(OTHERS)
    assert reads and set(reads) == {0}
    assert _count(warehouse) == 1 + len(OTHERS)


def test_two_analyses_at_once_both_succeed(warehouse: Path) -> None:
    commands = [[sys.executable, "-m", "tracelake", "analyze", str(trace), "--warehouse", str(warehouse), "--out",
                 str(warehouse.parent / f"report{i}"), "--quiet"] for i, trace in enumerate(OTHERS[:2])]
    running = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    finished = [(p.wait(timeout=600), p.stderr.read()) for p in running]
    assert [code for code, _ in finished] == [0, 0], finished
    assert _count(warehouse) == 3


def test_a_writer_blocked_by_another_waits_then_gives_up_with_one_line(warehouse: Path) -> None:
    with Warehouse(warehouse).write_lock():
        blocked = run_cli("ingest", str(OTHERS[0]), "--warehouse", str(warehouse), "--quiet",
                          env={WRITER_WAIT_ENV: "2"})
    assert blocked.returncode == 2, blocked.stderr
    notice, error = blocked.stderr.strip().splitlines()
    assert notice.startswith("tracelake: waiting for pid ")
    assert error.startswith("tracelake: error: warehouse ") and "busy" in error and WRITER_WAIT_ENV in error
    assert "Traceback" not in blocked.stderr
    assert _count(warehouse) == 1
    assert not list((warehouse / "staging").iterdir())  # the staged trace went with the refusal
    again = run_cli("ingest", str(OTHERS[0]), "--warehouse", str(warehouse), "--quiet")
    assert again.returncode == 0, again.stderr


DIE_WITH_A_WAL = """
import os, sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("set checkpoint_threshold = '1GB'")
con.execute("create table my_notes as select 42 as answer")
os._exit(0)  # no checkpoint: the change is only in the WAL
"""


def test_a_wal_left_by_an_in_place_writer_is_kept_and_cleared(warehouse: Path) -> None:
    db = warehouse / "warehouse.duckdb"
    subprocess.run([sys.executable, "-c", DIE_WITH_A_WAL, str(db)], check=True)
    assert db.with_name(db.name + ".wal").exists()
    ingested = run_cli("ingest", str(OTHERS[0]), "--warehouse", str(warehouse), "--quiet")
    assert ingested.returncode == 0, ingested.stderr
    assert not db.with_name(db.name + ".wal").exists()
    queried = run_cli("sql", "select answer from my_notes", "--warehouse", str(warehouse), "--format", "json")
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout) == [{"answer": 42}]
    assert _count(warehouse) == 2
