"""kill -9 on the lakehouse layout, with the local SQLite catalog and with a PostgreSQL one: at each
named point of a write (tracelake/crashpoints.py) and at random moments, the writer dies; every
trace is then whole or absent (its raw rows, every mart's rows and its ledger row agree with a
clean build), the next ingest finishes the job, and no data file the dead transaction wrote is
referenced by the catalog. Those files are orphans: DuckLake's ducklake_delete_orphaned_files
finds exactly them and deletes them, and the warehouse reads the same after.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.lake import lake_tables
from tests.lake.pg_server import PostgresServer
from tracelake.crashpoints import CRASH_AT_ENV

KILLED = -signal.SIGKILL
BASE = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
# each point kills the ingest of its own trace; the kill at "lake-committed" lands after the commit
POINT_TRACES = {
    "lake-claimed": TRACES / "torch_compile_triton" / "trace.json.gz",  # PostgreSQL only: claims are its
    "lake-raw-inserted": TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz",
    "lake-commit": TRACES / "inference" / "vllm_decode_full" / "graph_execution.json.gz",
    "lake-committed": TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz",
}
RANDOM_TRACES = [TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz",
                 TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"]
SEED = 20261204


@pytest.fixture(scope="module")
def clean_counts(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], int]:
    """Rows per (table, trace) of every trace these trials use, ingested without kills."""
    folder = tmp_path_factory.mktemp("clean") / "wh"
    every = [BASE, *POINT_TRACES.values(), *RANDOM_TRACES]
    done = run_cli("ingest", *map(str, every), "--warehouse", str(folder), "--catalog", "local", "--quiet")
    assert done.returncode == 0, done.stderr
    with lake_tables.connect(folder) as lake:
        return lake_tables.counts_per_trace(lake)


class Lake:
    """One warehouse of the trials, through the catalog under test."""

    def __init__(self, folder: Path, catalog: str, login: str, env: dict[str, str]) -> None:
        self.folder, self.catalog, self.login, self.env = folder, catalog, login, env

    def ingest(self, trace: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**self.env, **({CRASH_AT_ENV: crash_at} if crash_at else {})}
        return run_cli("ingest", str(trace), "--warehouse", str(self.folder), "--catalog", self.catalog, "--quiet",
                       env=env)

    def assert_whole_or_absent(self, clean: dict[tuple[str, str], int], present: set[str]) -> None:
        with lake_tables.connect(self.folder, self.login) as lake:
            counts = lake_tables.counts_per_trace(lake)
            ledger = {r[0] for r in lake.execute("select trace_id from trace_model_updates").fetchall()}
            raw = [r[0] for r in lake.execute("select trace_id from raw.trace_files").fetchall()]
        assert sorted(raw) == sorted(present)  # each committed once, the others nowhere
        assert ledger == present
        assert counts == {key: n for key, n in clean.items() if key[1] in present}

    def referenced(self) -> set[str]:
        with lake_tables.connect(self.folder, self.login) as lake:
            return lake_tables.referenced_files(lake)

    def leftover_staging(self) -> list[str]:
        staging = self.folder / "staging"
        return sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []


def _trace_id_of(trace: Path, ids: set[str]) -> str:
    from tracelake.ingest.reader import file_sha256  # noqa: PLC0415
    from tracelake.ingest.trace_ingest import trace_id_from_sha256  # noqa: PLC0415

    trace_id = trace_id_from_sha256(file_sha256(trace))
    assert trace_id in ids, trace
    return trace_id


@pytest.fixture(params=["local", "postgresql"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    if request.param == "local":
        return Lake(tmp_path / "wh", "local", "local", {})
    server: PostgresServer = request.getfixturevalue("postgres_server")
    catalog = server.create_database(f"crash_{tmp_path.name}"[:60])
    return Lake(tmp_path / "wh", catalog, server.url(catalog.rsplit("/", 1)[1], with_password=True),
                server.client_env())


def _ids(traces: list[Path], clean: dict[tuple[str, str], int]) -> set[str]:
    ids = {t for (table, t) in clean if table == "raw.trace_files"}
    return {_trace_id_of(trace, ids) for trace in traces}


def test_a_kill_at_each_point_leaves_every_trace_whole_or_absent(lake: Lake, clean_counts: dict[tuple[str, str], int]
                                                                 ) -> None:
    # killed between making the catalog and recording it in lake.json: the next ingest finishes it
    killed = lake.ingest(BASE, crash_at="lake-catalog-created")
    assert killed.returncode == KILLED, killed.stderr
    assert not (lake.folder / "lake.json").exists()
    # without --catalog: a local catalog is found in the folder; a PostgreSQL one cannot be guessed
    bare = run_cli("ingest", str(BASE), "--warehouse", str(lake.folder), "--quiet", env=lake.env)
    if lake.catalog == "local":
        assert bare.returncode == 0, bare.stderr
    else:
        assert bare.returncode == 2, bare.stderr
        assert "re-run with the same --catalog" in bare.stderr and len(bare.stderr.strip().splitlines()) == 1
        again = lake.ingest(BASE)
        assert again.returncode == 0, again.stderr
    present = _ids([BASE], clean_counts)
    lake.assert_whole_or_absent(clean_counts, present)

    dead_files: set[str] = set()
    for point, trace in POINT_TRACES.items():
        if point == "lake-claimed" and lake.catalog == "local":
            continue  # a local catalog's writers take turns on the fcntl lock; nothing is claimed
        before = lake_tables.files_on_disk(lake.folder)
        killed = lake.ingest(trace, crash_at=point)
        assert killed.returncode == KILLED, (point, killed.stderr)
        written = lake_tables.files_on_disk(lake.folder) - before
        committed = point == "lake-committed"
        lake.assert_whole_or_absent(clean_counts, present | (_ids([trace], clean_counts) if committed else set()))
        if point in ("lake-raw-inserted", "lake-commit"):
            assert written, f"{point}: the dead transaction wrote no data file (the trial proves nothing)"
        if not committed:
            assert not written & lake.referenced(), point
            dead_files |= written
        again = lake.ingest(trace)
        assert again.returncode == 0, (point, again.stderr)
        present |= _ids([trace], clean_counts)
        lake.assert_whole_or_absent(clean_counts, present)
        assert not dead_files & lake.referenced(), point  # the next commit took none of them up
        assert lake.leftover_staging() == [], point  # the dead run's staging folder is gone

    _orphans_are_exactly_the_dead_files(lake, dead_files, clean_counts, present)


def _orphans_are_exactly_the_dead_files(lake: Lake, dead_files: set[str], clean: dict[tuple[str, str], int],
                                        present: set[str]) -> None:
    """What DuckLake offers for the files of dead transactions: ducklake_delete_orphaned_files (its
    dry run too needs a writable attach)."""
    from tracelake.lakehouse import LakeWarehouse  # noqa: PLC0415

    with LakeWarehouse(lake.folder, lake.login).connect_lake(read_only=False, own_instance=True) as con:
        name = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        listed = con.execute(f"call ducklake_delete_orphaned_files('{name}', dry_run => true, "
                             "older_than => now())").fetchall()
        assert {Path(str(row[0])).name for row in listed} == dead_files
        con.execute(f"call ducklake_delete_orphaned_files('{name}', older_than => now())").fetchall()
    assert not dead_files & lake_tables.files_on_disk(lake.folder)
    lake.assert_whole_or_absent(clean, present)


def test_kills_at_random_moments_leave_every_trace_whole_or_absent(lake: Lake,
                                                                   clean_counts: dict[tuple[str, str], int]) -> None:
    started = time.monotonic()
    assert lake.ingest(BASE).returncode == 0
    duration = time.monotonic() - started  # a first build: longer than the ingests killed below
    present = _ids([BASE], clean_counts)
    chooser = random.Random(SEED)
    outcomes = []
    for trace in RANDOM_TRACES:
        delay = chooser.uniform(0.3, duration)
        command = [sys.executable, "-m", "tracelake", "ingest", str(trace), "--warehouse", str(lake.folder),
                   "--catalog", lake.catalog, "--quiet"]
        process = subprocess.Popen(command, env={**os.environ, "DO_NOT_TRACK": "1", **lake.env},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.kill()
        outcomes.append((round(delay, 2), process.wait()))
        with lake_tables.connect(lake.folder, lake.login) as con:
            there = {r[0] for r in con.execute("select trace_id from raw.trace_files").fetchall()}
        lake.assert_whole_or_absent(clean_counts, present | (there & _ids([trace], clean_counts)))
        again = lake.ingest(trace)
        assert again.returncode == 0, again.stderr
        present |= _ids([trace], clean_counts)
        lake.assert_whole_or_absent(clean_counts, present)
    assert any(code == KILLED for _, code in outcomes), outcomes


TAGGED = RANDOM_TRACES[0]
ANALYZED = RANDOM_TRACES[1]


def _tags_and_counts(folder: Path) -> tuple[dict[str, object], dict[tuple[str, str], int]]:
    with lake_tables.connect(folder) as lake:
        tags = {str(r[0]): r[1] for r in lake.execute("select trace_id, tags from raw.trace_files").fetchall()}
        return tags, lake_tables.counts_per_trace(lake)


@pytest.fixture(scope="module")
def two_trace_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two") / "wh"
    done = run_cli("ingest", str(BASE), str(TAGGED), "--warehouse", str(folder), "--catalog", "local", "--quiet")
    assert done.returncode == 0, done.stderr
    return folder


def _copy_of(folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wh"
    shutil.copytree(folder, copy)
    return copy


@pytest.mark.parametrize("point", ["lake-commit", "lake-committed"])
@pytest.mark.parametrize("command", ["tag", "rm"])
def test_a_killed_tag_or_rm_changes_everything_or_nothing(two_trace_lake: Path, tmp_path: Path,
                                                           clean_counts: dict[tuple[str, str], int],
                                                           command: str, point: str) -> None:
    folder = _copy_of(two_trace_lake, tmp_path)
    before_tags, before_counts = _tags_and_counts(folder)
    target = _ids([TAGGED], clean_counts).pop()
    args = [target, "run=nightly-7"] if command == "tag" else [target]
    killed = run_cli(command, *args, "--warehouse", str(folder), env={CRASH_AT_ENV: point})
    assert killed.returncode == KILLED, killed.stderr
    tags, counts = _tags_and_counts(folder)
    if point == "lake-commit":  # died before its commit: nothing changed
        assert (tags, counts) == (before_tags, before_counts)
    elif command == "tag":  # committed: the tag, and the marts that read it re-modelled in the same snapshot
        assert tags[target] == {**before_tags[target], "run": "nightly-7"}  # type: ignore[dict-item]
        assert counts == before_counts
        with lake_tables.connect(folder) as lake:
            assert lake.execute("select run from runs where trace_id = ?", [target]).fetchone() == ("nightly-7",)
    else:  # committed: the trace is gone from every table, the other one untouched
        assert set(tags) == set(before_tags) - {target}
        assert counts == {key: n for key, n in before_counts.items() if key[1] != target}
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert not (folder / "staging").is_dir() or not any((folder / "staging").iterdir())


@pytest.mark.parametrize("point", ["staged", "lake-commit", "report-staged", "report-published"])
def test_a_killed_analyze_leaves_the_old_report_or_the_new_one(two_trace_lake: Path, tmp_path: Path,
                                                                point: str) -> None:
    folder = _copy_of(two_trace_lake, tmp_path)
    out = tmp_path / "report"
    first = run_cli("analyze", str(TAGGED), "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = (out / "analysis.md").read_bytes()
    # a new trace: the kill lands in its ingest ("staged", the commit) or in the report's writing
    killed = run_cli("analyze", str(ANALYZED), "--warehouse", str(folder), "--out", str(out), "--quiet",
                     env={CRASH_AT_ENV: point})
    assert killed.returncode == KILLED, killed.stderr
    assert (out / "analysis.md").read_bytes() == before or point == "report-published"
    again = run_cli("analyze", str(ANALYZED), "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr
    assert (out / "analysis.md").read_bytes() != before
    assert [p.name for p in tmp_path.glob(".tracelake-*")] == []  # the dead run's staging is gone
    with lake_tables.connect(folder) as lake:
        recorded = lake.execute("select count(*) from analyses where out_dir = ?", [str(out)]).fetchone()
        listed = lake.execute("select count(*) from traces").fetchone()
    assert (recorded, listed) == ((1,), (3,))
