"""`tracelake rm` beside readers, after kills and on a full disk: a reader keeps every file of the
snapshot it opened (removal waits for it), no byte of a removed trace stays in any file of the
warehouse, a kill at any point of rm never brings the trace back, and rm frees a full disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tracelake.crashpoints import CRASH_AT_ENV
from tracelake.removal import JOURNAL_FILE

pytestmark = pytest.mark.usefixtures("classic_layout")  # the classic layout's own machinery

KEPT = TRACES / "torch_compile_triton" / "trace.json.gz"  # trace A: read throughout
REMOVED = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"  # trace B: removed and re-ingested
RM_CYCLES = 6  # rm B, ingest B again: on the code before the fix, 6 cycles broke reads every run (see README)
READERS = 2
# every raw table of both traces, through the public `events` view and the raw views (they open the
# Parquet files of every trace the snapshot holds), again and again in one process as `analyze` does;
# the last statement's result is printed
READ_ONCE = ("select trace_id, count(*) as n from (select trace_id from events union all "
             "select trace_id from raw.host_ops union all select trace_id from raw.gpu_ops union all "
             "select trace_id from raw.flows union all select trace_id from raw.trace_files) group by 1 order by 1")
READ_QUERY = "; ".join([READ_ONCE] * 40)


def _trace_id(folder: Path, path: Path) -> str:
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        row = db.execute("select trace_id from traces where source_path = ?", [str(path.resolve())]).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture(scope="module")
def two_traces(built_once, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two") / "wh"
    shutil.copytree(built_once(KEPT), folder)
    ingested = run_cli("ingest", str(REMOVED), "--warehouse", str(folder), "--quiet")
    assert ingested.returncode == 0, ingested.stderr
    return folder


@pytest.fixture
def warehouse(two_traces: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "wh"
    shutil.copytree(two_traces, folder)
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0  # views re-pointed at the copy
    return folder


def _counts(folder: Path) -> dict[str, int]:
    result = run_cli("sql", READ_QUERY, "--warehouse", str(folder), "--format", "json")
    assert result.returncode == 0, result.stderr
    return {row["trace_id"]: row["n"] for row in json.loads(result.stdout)}


def _read_until(folder: Path, stop: threading.Event, outcomes: list[tuple[int, str, str]]) -> None:
    while not stop.is_set():
        result = run_cli("sql", READ_QUERY, "--warehouse", str(folder), "--format", "json")
        outcomes.append((result.returncode, result.stdout, result.stderr))


def _reads_beside(folder: Path, writes: list[list[str]]) -> tuple[list[tuple[int, str, str]], list[str]]:
    """Run `writes` (CLI argument lists, one after the other) while READERS loops read the warehouse."""
    stop = threading.Event()
    outcomes: list[tuple[int, str, str]] = []
    readers = [threading.Thread(target=_read_until, args=(folder, stop, outcomes)) for _ in range(READERS)]
    for reader in readers:
        reader.start()
    try:
        done = [run_cli(*args, "--warehouse", str(folder), *(["--quiet"] if args[0] == "ingest" else []))
                for args in writes]
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    return outcomes, [result.stderr.strip() for result in done if result.returncode != 0]


def test_reads_beside_rm_of_another_trace_never_lose_a_file(warehouse: Path) -> None:
    whole = _counts(warehouse)
    kept, removed = _trace_id(warehouse, KEPT), _trace_id(warehouse, REMOVED)
    writes = [args for _ in range(RM_CYCLES) for args in (["rm", removed], ["ingest", str(REMOVED)])]
    outcomes, failed_writes = _reads_beside(warehouse, writes)
    assert failed_writes == []
    failed = [stderr.strip() for code, _, stderr in outcomes if code != 0]
    # each read sees its snapshot whole: A always, B whole or not at all (never some of its files)
    seen = [{row["trace_id"]: row["n"] for row in json.loads(stdout)} for code, stdout, _ in outcomes if code == 0]
    torn = [counts for counts in seen if counts.get(kept) != whole[kept]
            or counts.get(removed, whole[removed]) != whole[removed]]
    print(f"{len(failed)} of {len(outcomes)} reads failed, {len(torn)} saw part of a trace, beside {RM_CYCLES} "
          "rm + ingest cycles")
    assert (failed, torn) == ([], []), (failed[:3], torn[:3])
    assert _counts(warehouse) == whole
    assert not (warehouse / JOURNAL_FILE).exists()  # no reader left: the last removal finished


def _unique_strings(folder: Path, kept: str, removed: str) -> list[bytes]:
    """Strings only the removed trace holds: its id, its file name, its kernel and op names."""
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        rows = db.execute("select distinct name from events where trace_id = ? and length(name) >= 24 except "
                          "select distinct name from events where trace_id = ?", [removed, kept]).fetchall()
    return [removed.encode(), REMOVED.name.encode()] + sorted(row[0].encode() for row in rows)


def _files_holding(folder: Path, strings: list[bytes]) -> dict[str, list[bytes]]:
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        data = path.read_bytes()
        hits = [s for s in strings if s in data]
        if hits:
            found[str(path.relative_to(folder))] = hits[:2]
    return found


def test_a_removed_trace_leaves_no_byte_in_any_file_of_the_warehouse(warehouse: Path) -> None:
    kept, removed = _trace_id(warehouse, KEPT), _trace_id(warehouse, REMOVED)
    analyzed = run_cli("analyze", str(REMOVED), "--warehouse", str(warehouse), "--out",
                       str(warehouse.parent / "report"), "--quiet")  # findings and analyses rows name it too
    assert analyzed.returncode == 0, analyzed.stderr
    strings = _unique_strings(warehouse, kept, removed)
    assert len(strings) > 10
    before = _files_holding(warehouse, strings)
    assert "warehouse.duckdb" in before and any(name.startswith("parquet/") for name in before)
    result = run_cli("rm", removed, "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert _files_holding(warehouse, strings) == {}
    assert set(_counts(warehouse)) == {kept}


# the points `rm` passes, in order: the journal written, the snapshot without the rows published (a
# rename), the journal updated, the Parquet deleted (killed after the first partition)
RM_POINTS = ["removal-journaled", "before-publish", "after-publish", "removal-published", "removal-parquet"]


@pytest.mark.parametrize("point", RM_POINTS)
def test_a_killed_rm_is_finished_by_the_next_command_and_the_trace_never_comes_back(warehouse: Path,
                                                                                    point: str) -> None:
    kept, removed = _trace_id(warehouse, KEPT), _trace_id(warehouse, REMOVED)
    strings = _unique_strings(warehouse, kept, removed)
    killed = run_cli("rm", removed, "--warehouse", str(warehouse), env={CRASH_AT_ENV: point})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    listed = run_cli("traces", "--warehouse", str(warehouse), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [row["trace_id"] for row in json.loads(listed.stdout)] == [kept]
    assert "finishing the model update" not in listed.stderr  # never modelled again
    again = run_cli("ingest", str(KEPT), "--warehouse", str(warehouse), "--quiet")  # a writer's open too
    assert again.returncode == 0, again.stderr
    assert set(_counts(warehouse)) == {kept}
    assert not (warehouse / JOURNAL_FILE).exists()
    assert sorted(p.name for p in warehouse.glob("parquet/*/*")) == [f"trace_id={kept}"] * 6
    assert [p.name for p in warehouse.glob(".tracelake-*")] == [] and not any((warehouse / "staging").iterdir())
    assert _files_holding(warehouse, strings) == {}


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 64 MB file system (tmpfs), root only: room for the warehouse of the two traces, a copy of its
    database (a classic writer's) and a little more."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _free(folder: Path) -> int:
    status = os.statvfs(folder)
    return status.f_bavail * status.f_frsize


def test_rm_frees_a_full_disk(two_traces: Path, small_disk: Path) -> None:
    folder = small_disk / "wh"
    shutil.copytree(two_traces, folder)
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
    kept, removed = _trace_id(folder, KEPT), _trace_id(folder, REMOVED)
    strings = _unique_strings(folder, kept, removed)
    database = (folder / "warehouse.duckdb").stat().st_size
    (small_disk / "filler").write_bytes(b"\0" * (_free(small_disk) - (256 << 10)))  # 256 kB left: no copy fits
    assert _free(small_disk) < database / 4
    full = _free(small_disk)
    result = run_cli("rm", removed, "--warehouse", str(folder))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert _free(small_disk) > full  # the removed trace's Parquet is gone
    assert set(_counts(folder)) == {kept}
    assert not list(folder.glob(f"parquet/*/trace_id={removed}"))
    assert [p.name for p in folder.glob(".tracelake-*")] == []
    # the database still holds the deleted rows' bytes until it can be rewritten: rm said so
    assert "no room to rewrite" in result.stderr, result.stderr
    (small_disk / "filler").unlink()
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")  # the next command rewrites it
    assert listed.returncode == 0, listed.stderr
    assert [row["trace_id"] for row in json.loads(listed.stdout)] == [kept]
    assert not (folder / JOURNAL_FILE).exists()
    assert _files_holding(folder, strings) == {}


ANALYZE_RACES = 3


def test_analyze_of_the_trace_rm_removes_is_whole_or_one_line(warehouse: Path) -> None:
    removed = _trace_id(warehouse, REMOVED)
    for race in range(ANALYZE_RACES):
        analyzing = subprocess.Popen([sys.executable, "-m", "tracelake", "analyze", str(REMOVED), "--warehouse",
                                      str(warehouse), "--out", str(warehouse.parent / f"report{race}"), "--quiet"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "DO_NOT_TRACK": "1"})
        time.sleep(0.5 + 0.5 * race)  # the rm lands in the ingest, between it and the reads, or in the reads
        removing = run_cli("rm", removed, "--warehouse", str(warehouse))
        _, stderr = analyzing.communicate(timeout=600)
        assert "Traceback" not in stderr and "internal error" not in stderr, stderr
        assert analyzing.returncode == 0 or (analyzing.returncode == 2 and "was removed" in stderr), stderr
        assert removing.returncode in (0, 2), removing.stderr  # 2: the analyze ingested it again after rm chose
        assert "internal error" not in removing.stderr, removing.stderr
        again = run_cli("ingest", str(REMOVED), "--warehouse", str(warehouse), "--quiet")
        assert again.returncode == 0, again.stderr


HOLD_A_READER = f"""
import sys
from pathlib import Path
from tracelake.warehouse import Warehouse
con = Warehouse(Path(sys.argv[1])).connect_read_only()  # as every tracelake reader opens the warehouse
query = {READ_ONCE!r}
print(dict(con.execute(query).fetchall()), flush=True)
sys.stdin.readline()  # holds the connection (its snapshot) until told
print(dict(con.execute(query).fetchall()), flush=True)
"""


def test_rm_beside_an_open_reader_keeps_its_files_until_it_is_done(warehouse: Path) -> None:
    kept, removed = _trace_id(warehouse, KEPT), _trace_id(warehouse, REMOVED)
    reader = subprocess.Popen([sys.executable, "-c", HOLD_A_READER, str(warehouse)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        opened = reader.stdout.readline()
        result = run_cli("rm", removed, "--warehouse", str(warehouse))
        assert result.returncode == 0, result.stderr
        assert "a reader of an older snapshot is open" in result.stderr
        assert set(_counts(warehouse)) == {kept}  # a new reader sees the trace gone
        assert list(warehouse.glob(f"parquet/*/trace_id={removed}"))  # the old snapshot's files stay
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline() == opened  # the open reader read its snapshot whole
    finally:
        reader.communicate(timeout=60)
    assert reader.returncode == 0
    listed = run_cli("traces", "--warehouse", str(warehouse))  # no reader left: the next command deletes them
    assert listed.returncode == 0, listed.stderr
    assert not list(warehouse.glob(f"parquet/*/trace_id={removed}"))
    assert not (warehouse / JOURNAL_FILE).exists()
