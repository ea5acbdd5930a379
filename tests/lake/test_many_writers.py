"""Many writers through one PostgreSQL catalog, as if on different machines: processes that share
no fcntl lock ingest at once into one warehouse; DuckLake's transactions keep them apart."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tests.lake import lake_tables
from tests.lake.pg_server import PostgresServer
from tracelake.lake_catalog import LakeLayout
from tracelake.lake_writers import claiming, is_commit_conflict, retry_on_conflict
from tracelake.writer_lock import WRITER_WAIT_ENV, hold_writer_lock

# disjoint sets of real traces, one per writer
WRITER_TRACES = [
    [TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", TRACES / "cpu_only" / "cpu_mlp_training.json.gz"],
    [TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz", TRACES / "torch_compile_triton" / "trace.json.gz"],
    [TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz",
     TRACES / "inference" / "vllm_decode_full" / "graph_execution.json.gz"],
]
SMALL = TRACES / "torch_compile_triton" / "trace.json.gz"


def _ingest_command(folder: Path, traces: list[Path], catalog: str) -> list[str]:
    return [sys.executable, "-m", "tracelake", "ingest", *map(str, traces), "--warehouse", str(folder),
            "--catalog", catalog, "--quiet"]


def _creation_only(changes: dict[str, object]) -> bool:
    return set(changes) <= {"schemas_created"}


@pytest.fixture(scope="module")
def serial_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same traces, one writer after another, through the local catalog."""
    folder = tmp_path_factory.mktemp("serial") / "wh"
    for traces in WRITER_TRACES:
        done = run_cli("ingest", *map(str, traces), "--warehouse", str(folder), "--catalog", "local", "--quiet")
        assert done.returncode == 0, done.stderr
    return folder


def test_writers_at_once_through_postgres_equal_a_serial_build(postgres_server: PostgresServer, pg_catalog: str,
                                                               serial_build: Path, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    env = {**os.environ, **postgres_server.client_env(), "DO_NOT_TRACK": "1", WRITER_WAIT_ENV: "5"}
    started = time.monotonic()
    # the fcntl lock is held all along: a writer that waited for it would give up after 5 s
    with hold_writer_lock(folder, folder / ".lock", threading.Event()):
        writers = [subprocess.Popen(_ingest_command(folder, traces, pg_catalog), env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for traces in WRITER_TRACES]
        results = [(w.communicate(timeout=900), w.returncode) for w in writers]
    seconds = time.monotonic() - started
    for (_, err), code in results:
        assert code == 0, err
    retried = sum("committing again" in err for (_, err), _ in results)
    print(f"\n{len(WRITER_TRACES)} writers, {sum(map(len, WRITER_TRACES))} traces through PostgreSQL: "
          f"{seconds:.1f} s, {retried} writer(s) retried a commit")

    catalog = postgres_server.url(pg_catalog.rsplit("/", 1)[1], with_password=True)
    with lake_tables.connect(folder, catalog) as lake, lake_tables.connect(serial_build) as serial:
        committed = lake.execute("select trace_id, snapshot_id from raw.trace_files").fetchall()
        ledger = sorted(r[0] for r in lake.execute("select trace_id from trace_model_updates").fetchall())
        expected = sorted(r[0] for r in serial.execute("select trace_id from raw.trace_files").fetchall())
        assert sorted(r[0] for r in committed) == expected  # none lost, none twice
        assert ledger == expected
        # one snapshot per writer's commit, holding all its traces; the others only made the catalog
        per_snapshot: dict[int, set[str]] = {}
        for trace_id, snapshot in committed:
            per_snapshot.setdefault(int(snapshot), set()).add(str(trace_id))
        assert len(per_snapshot) == len(WRITER_TRACES)
        assert all(len(ids) == 2 for ids in per_snapshot.values()), per_snapshot
        for snapshot, changes in lake_tables.snapshots(lake):
            assert snapshot in per_snapshot or _creation_only(changes), (snapshot, changes)
        assert lake_tables.counts_per_trace(lake) == lake_tables.counts_per_trace(serial)
        ours, theirs = lake_tables.every_relation(lake), lake_tables.every_relation(serial)
    assert sorted(ours) == sorted(theirs)
    differing = [name for name in ours if ours[name] != theirs[name]]
    assert differing == [], differing


def test_two_writers_of_one_trace_commit_it_once(postgres_server: PostgresServer, pg_catalog: str,
                                                 tmp_path: Path) -> None:
    """Both writers are held at their claim until the test lets go: they race, and the one that
    commits second finds the trace there and leaves it."""
    folder = tmp_path / "wh"
    database = pg_catalog.rsplit("/", 1)[1]
    made = run_cli("ingest", str(TRACES / "cpu_only" / "cpu_mlp_training.json.gz"), "--warehouse", str(folder),
                   "--catalog", pg_catalog, "--quiet", env=postgres_server.client_env())
    assert made.returncode == 0, made.stderr
    trace_id = run_cli("ingest", str(SMALL), "--warehouse", str(tmp_path / "probe"), "--catalog", "local",
                       "--quiet").stdout.split()[0]
    env = {**os.environ, **postgres_server.client_env(), "DO_NOT_TRACK": "1"}
    url = postgres_server.url(database, with_password=True)
    with claiming(url, LakeLayout(pg_catalog), [trace_id]):
        writers = [subprocess.Popen(_ingest_command(folder, [SMALL], pg_catalog), env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _waiting_claims(postgres_server, database) < 2:
            assert all(w.poll() is None for w in writers), [w.communicate() for w in writers]
            time.sleep(0.2)
        assert _waiting_claims(postgres_server, database) == 2  # both staged it and wait to commit it
    results = [(w.communicate(timeout=300), w.returncode) for w in writers]
    assert [code for _, code in results] == [0, 0], results
    with lake_tables.connect(folder, url) as lake:
        copies = lake.execute("select count(*) from raw.trace_files where trace_id = ?", [trace_id]).fetchone()
        modelled = lake.execute("select count(*) from trace_model_updates where trace_id = ?", [trace_id]).fetchone()
        kernels = lake.execute("select count(*) from kernels where trace_id = ?", [trace_id]).fetchone()
    assert (copies, modelled) == ((1,), (1,))
    assert kernels is not None and kernels[0] > 0


def _waiting_claims(server: PostgresServer, database: str) -> int:
    return int(server.psql("select count(*) from pg_locks l join pg_database d on d.oid = l.database "
                           f"where l.locktype = 'advisory' and not l.granted and d.datname = '{database}'").strip())


def test_ducklake_refuses_a_clashing_commit_and_the_retry_commits_it(postgres_server: PostgresServer,
                                                                      pg_catalog: str, tmp_path: Path) -> None:
    """What DuckLake 1.5.5 says when two transactions create the first tables of an empty lake:
    the second commit is refused whole (TransactionException, 'Transaction conflict'); run again
    on the new snapshot it commits."""
    url = postgres_server.url(pg_catalog.rsplit("/", 1)[1], with_password=True)
    layout = LakeLayout(pg_catalog)
    from tracelake.lakehouse import LakeWarehouse  # noqa: PLC0415

    lake = LakeWarehouse(tmp_path / "wh", url)
    lake.create(url)
    first, second = (lake.connect_lake(read_only=False, own_instance=True, layout=layout) for _ in range(2))
    tries: list[int] = []

    def attempt() -> None:
        """The way a writer makes a table: created by the first, inserted into by the others."""
        tries.append(1)
        second.begin()
        made = second.execute("select count(*) from information_schema.tables where table_catalog = "
                              "current_database() and table_name = 'marts'").fetchone()
        second.execute("insert into marts values (2)" if made and made[0] else "create table marts as select 2 as x")
        if len(tries) == 1:  # another writer commits the table first
            first.begin()
            first.execute("create table marts as select 1 as x")
            first.commit()
        second.commit()

    try:
        first.begin()
        first.execute("create table clash as select 1 as x")
        second.begin()
        second.execute("create table clash as select 2 as x")
        first.commit()
        with pytest.raises(duckdb.TransactionException) as refused:
            second.commit()
        assert is_commit_conflict(refused.value)
        assert "Transaction conflict - attempting to create table" in str(refused.value)
        assert second.execute("select x from clash").fetchall() == [(1,)]  # nothing of the refused one
        retry_on_conflict(attempt, "test")
        assert len(tries) == 2
        assert sorted(r[0] for r in second.execute("select x from marts").fetchall()) == [1, 2]
    finally:
        first.close()
        second.close()
