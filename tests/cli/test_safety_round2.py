"""Issue 27, second safety round: the writers' lock file is never followed or someone else's,
internal errors become one line, capture folders are not left, concurrent ingests agree, `sql`
stops at its timeout. Everything through the real CLI on real traces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE
from tests.conftest import DATA, TRACES, run_cli
from tracelake.lakehouse import open_warehouse

SECOND_TRACE = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
THIRD_TRACE = TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz"
PRECIOUS = b"export PATH=$HOME/bin:$PATH  # someone's ~/.bashrc\n"


def _refused(result, *words: str) -> str:
    """The command failed as bad input: exit 2, one line on stderr, no traceback; returns the line."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelake: error:"), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _trace_id(warehouse: Path, trace: Path) -> str:
    result = run_cli("sql", f"select trace_id from traces where file_name = '{trace.name}'",
                     "--warehouse", str(warehouse), "--format", "csv")
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()[1]


def _two_traces(folder: Path, *layout: str) -> Path:
    result = run_cli("ingest", str(SMALL_TRACE), str(SECOND_TRACE), "--warehouse", str(folder), "--quiet", *layout)
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def two_trace_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small traces (rm refuses to empty a warehouse): copied by each test that writes."""
    return _two_traces(tmp_path_factory.mktemp("two_traces") / "wh")


@pytest.fixture(scope="module")
def two_trace_classic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same, in the classic layout: the one dbt runs on."""
    return _two_traces(tmp_path_factory.mktemp("two_classic") / "wh", "--catalog", "classic")


@dataclass(frozen=True)
class WarehouseCopy:
    root: Path
    writers: dict[str, tuple[str, ...]]  # each writer command's arguments, against `root`


def _copy(source: Path, tmp_path: Path) -> WarehouseCopy:
    """A copy of a two-trace warehouse, with one command line per writer."""
    root = tmp_path / "wh"
    shutil.copytree(source, root)
    trace_id = _trace_id(source, SMALL_TRACE)  # a content hash: the same in the copy
    where = ("--warehouse", str(root))
    return WarehouseCopy(root, {
        "ingest": ("ingest", str(THIRD_TRACE), "--quiet", *where),
        "analyze": ("analyze", str(SMALL_TRACE), "--out", str(tmp_path / "report"), "--quiet", *where),
        "tag": ("tag", trace_id, "run=probe", *where),
        "rm": ("rm", trace_id, *where),
        "build": ("build", "--quiet", *where),
    })


@pytest.fixture
def fresh(two_trace_warehouse: Path, tmp_path: Path) -> WarehouseCopy:
    return _copy(two_trace_warehouse, tmp_path)


@pytest.fixture
def fresh_classic(two_trace_classic: Path, tmp_path: Path) -> WarehouseCopy:
    return _copy(two_trace_classic, tmp_path)


def _plant(lock: Path, make: Callable[[Path], object]) -> None:
    lock.unlink(missing_ok=True)
    make(lock)


# ---- item 1: the lock file ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["ingest", "analyze", "tag", "rm", "build"])
def test_a_lock_symlink_is_never_written_through(fresh: WarehouseCopy, tmp_path: Path, command: str) -> None:
    victim = tmp_path / "bashrc"
    victim.write_bytes(PRECIOUS)
    _plant(fresh.root / ".lock", lambda lock: lock.symlink_to(victim))
    _refused(run_cli(*fresh.writers[command]), str(fresh.root / ".lock"), "symbolic link")
    assert victim.read_bytes() == PRECIOUS
    assert (fresh.root / ".lock").is_symlink()


def test_a_dangling_lock_symlink_creates_nothing(fresh: WarehouseCopy, tmp_path: Path) -> None:
    target = tmp_path / "created_by_tracelake"
    _plant(fresh.root / ".lock", lambda lock: lock.symlink_to(target))
    for command in ("tag", "rm"):
        _refused(run_cli(*fresh.writers[command]), "symbolic link")
    assert not target.exists() and not target.is_symlink()


@pytest.mark.parametrize("command", ["ingest", "tag"])
def test_a_lock_hard_link_is_refused(fresh: WarehouseCopy, tmp_path: Path, command: str) -> None:
    victim = tmp_path / "bashrc"
    victim.write_bytes(PRECIOUS)
    _plant(fresh.root / ".lock", lambda lock: os.link(victim, lock))
    _refused(run_cli(*fresh.writers[command]), "hard link")
    assert victim.read_bytes() == PRECIOUS


def test_a_lock_fifo_or_folder_is_refused_without_hanging(fresh: WarehouseCopy) -> None:
    _plant(fresh.root / ".lock", os.mkfifo)
    _refused(run_cli(*fresh.writers["tag"]), "not a regular file")
    _plant(fresh.root / ".lock", Path.mkdir)
    _refused(run_cli(*fresh.writers["tag"]), "a folder")


def test_a_lock_file_of_another_user_is_refused(fresh: WarehouseCopy) -> None:
    """A regular file planted by a third user (neither the writer nor the folder's owner)."""
    lock = fresh.root / ".lock"
    _plant(lock, lambda path: path.write_bytes(PRECIOUS))
    os.chown(lock, 65534, 65534)
    _refused(run_cli(*fresh.writers["tag"]), "owned by user 65534")
    assert lock.read_bytes() == PRECIOUS


def test_the_lock_file_tracelake_made_still_works(fresh: WarehouseCopy) -> None:
    for _ in range(2):  # made by the first writer, reused by the second
        result = run_cli(*fresh.writers["tag"])
        assert result.returncode == 0, result.stderr
    lock = fresh.root / ".lock"
    assert lock.is_file() and not lock.is_symlink()
    assert lock.read_bytes() == b""  # the holder's note is cleared on release


# ---- item 6: internal errors that are the user's to fix -----------------------------------------

# root without the capabilities that bypass file permissions: to the kernel, a user who owns none of
# the warehouse (the interpreter lives under /root, which another uid cannot reach)
AS_ANOTHER_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-chown",
                   "--inh-caps", "-dac_override,-dac_read_search,-fowner,-chown"]


def _run_as_another_user(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AS_ANOTHER_USER, sys.executable, "-m", "tracelake", *args], check=False, capture_output=True,
                          text=True, env={**os.environ, "DO_NOT_TRACK": "1"}, timeout=600)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
@pytest.mark.parametrize("command", ["ingest", "analyze", "tag", "rm", "build"])
def test_a_shared_warehouse_whose_folders_another_user_made_says_which(fresh: WarehouseCopy, command: str) -> None:
    assert run_cli("traces", "--warehouse", str(fresh.root)).returncode == 0  # the copy's views re-pointed
    for path in [fresh.root, *fresh.root.rglob("*")]:
        os.chown(path, 65534, 65534, follow_symlinks=False)  # made by user 65534 (umask 022)
    fresh.root.chmod(0o777)  # the shared top folder everyone may write
    before = {str(p): p.stat().st_mtime_ns for p in fresh.root.rglob("*")}
    _refused(_run_as_another_user(*fresh.writers[command]), "is not writable by you", "belongs to user 65534")
    assert {str(p): p.stat().st_mtime_ns for p in fresh.root.rglob("*")} == before


def test_a_backslash_in_the_warehouse_path_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "team\\runs"
    _refused(run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(folder), "--quiet"), "backslash")
    assert not folder.exists() and not (tmp_path / "team").exists()


def test_analyze_compare_of_two_long_file_names_writes_its_report(tmp_path: Path) -> None:
    """Two 200-character names: `<name>_vs_<name2>_analysis` is clipped to NAME_MAX, a hash keeps it apart."""
    first, second = tmp_path / ("a" * 200 + ".json.gz"), tmp_path / ("b" * 200 + ".json.gz")
    shutil.copyfile(SMALL_TRACE, first)
    shutil.copyfile(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", second)
    result = run_cli("analyze", str(first), "--compare", str(second), "--warehouse", str(tmp_path / "wh"), "--quiet")
    assert result.returncode == 0, result.stderr
    (report,) = [p for p in tmp_path.iterdir() if p.name.endswith("_analysis")]
    assert len(report.name.encode()) <= 255 and report.name.startswith("a" * 100)
    assert (report / "analysis.md").is_file()
    assert f"wrote {report / 'analysis.md'}" in result.stdout


def test_export_of_an_open_ended_window_is_cut_to_the_trace(two_trace_warehouse: Path, tmp_path: Path) -> None:
    trace_id = _trace_id(two_trace_warehouse, SMALL_TRACE)
    where = ("--warehouse", str(two_trace_warehouse))
    whole = run_cli("export", trace_id, "--out", str(tmp_path / "whole.json"), *where)
    assert whole.returncode == 0, whole.stderr
    span = json.loads((tmp_path / "whole.json").read_text())["tracelake_export"]
    for window in ("-inf:inf", "-1e308:1.7e308", f"{span['start_us']}:inf"):
        result = run_cli("export", trace_id, "--window", window, "--out", str(tmp_path / "w.json"), "--force", *where)
        assert result.returncode == 0, (window, result.stderr)
        cut = json.loads((tmp_path / "w.json").read_text())["tracelake_export"]
        assert (cut["start_us"], cut["end_us"]) == (span["start_us"], span["end_us"]), window
    for window in ("nan:5", "0:nan", "inf:inf", "1e300:inf"):
        _refused(run_cli("export", trace_id, "--window", window, "--out", str(tmp_path / "x.json"), *where), "--window")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
@pytest.mark.parametrize("made_by_another", ["lake/main", "staging", "pending"])
def test_one_folder_another_user_made_is_named(fresh: WarehouseCopy, made_by_another: str) -> None:
    assert run_cli("traces", "--warehouse", str(fresh.root)).returncode == 0  # the copy's views re-pointed
    for path in [fresh.root, *fresh.root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)  # a shared warehouse everyone may write
    theirs = fresh.root / made_by_another
    theirs.mkdir(exist_ok=True)
    theirs.chmod(0o755)
    os.chown(theirs, 65534, 65534)
    _refused(_run_as_another_user(*fresh.writers["tag"]), f"warehouse folder {theirs} is not writable by you")


# ---- item 8: capture folders, concurrent ingests, sql timeout ------------------------------------

VLLM_REPLAY = TRACES / "inference" / "vllm_decode_full" / "graph_execution.json.gz"
VLLM_CAPTURES = DATA / "captures" / "inference__vllm_decode_full"


def test_execution_details_never_leads_out_of_the_capture_folder(tmp_path: Path) -> None:
    serve = tmp_path / "serve"
    captures = serve / "capture_traces"
    captures.mkdir(parents=True)
    shutil.copyfile(VLLM_REPLAY, serve / VLLM_REPLAY.name)
    details = json.loads((VLLM_CAPTURES / "execution_details.json").read_text())
    shutil.copyfile(VLLM_CAPTURES / details[0]["file"], captures / details[0]["file"])
    outside = tmp_path / "private"
    outside.mkdir()
    for name in ("secret.json.gz", "linked.json.gz", "absolute.json.gz"):
        shutil.copyfile(THIRD_TRACE if name == "secret.json.gz" else SECOND_TRACE, outside / name)
    # a link inside, to a file outside (not named like a trace: a folder scan follows the links it finds)
    (captures / "escape.link").symlink_to(outside / "linked.json.gz")
    details += [{"file": "../../private/secret.json.gz", "batch_size": 1, "mode": "FULL"},
                {"file": "escape.link", "batch_size": 2, "mode": "FULL"},
                {"file": str(outside / "absolute.json.gz"), "batch_size": 4, "mode": "FULL"}]
    (captures / "execution_details.json").write_text(json.dumps(details))
    warehouse = tmp_path / "wh"
    for args in (("ingest", str(serve), "--quiet"),
                 ("analyze", str(serve / VLLM_REPLAY.name), "--capture-folder", str(captures), "--quiet",
                  "--out", str(tmp_path / "report"))):
        result = run_cli(*args, "--warehouse", str(warehouse))
        assert result.returncode == 0, result.stderr
        notes = [line for line in result.stderr.splitlines() if "outside the capture folder" in line]
        assert len(notes) == 1 and "skipped 3 capture file(s)" in notes[0], result.stderr
        assert "Traceback" not in result.stderr
    listed = run_cli("sql", "select file_name from traces order by 1", "--warehouse", str(warehouse), "--format", "csv")
    assert listed.stdout.splitlines()[1:] == sorted([details[0]["file"], VLLM_REPLAY.name])


def test_two_concurrent_ingests_of_one_file_say_new_once(fresh: WarehouseCopy) -> None:
    """Both decode the file while a third writer holds the lock; the one that commits second sees the
    trace committed and says so as a re-ingest does."""
    assert run_cli("traces", "--warehouse", str(fresh.root)).returncode == 0  # the copy's views re-pointed
    logs = [fresh.root.parent / f"ingest{i}" for i in range(2)]
    with open_warehouse(fresh.root).write_lock():
        processes = [subprocess.Popen([sys.executable, "-m", "tracelake", *fresh.writers["ingest"]],
                                      stdout=(log.with_suffix(".out")).open("w"),
                                      stderr=(log.with_suffix(".err")).open("w"), env={**os.environ, "DO_NOT_TRACK": "1"})
                     for log in logs]
        deadline = time.monotonic() + 300
        while not all("waiting for" in log.with_suffix(".err").read_text() for log in logs):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
            time.sleep(0.2)
    assert [p.wait(timeout=300) for p in processes] == [0, 0]
    outputs = [log.with_suffix(".out").read_text() for log in logs]
    assert sorted(" events " in out for out in outputs) == [False, True], outputs  # one says new
    assert sorted("already ingested" in out for out in outputs) == [False, True], outputs  # the other, known


def test_sql_stops_at_its_timeout(two_trace_warehouse: Path) -> None:
    cross_join = "select count(*) from range(1000000000) a, range(1000000000) b"
    started = time.monotonic()
    result = run_cli("sql", cross_join, "--timeout", "1", "--warehouse", str(two_trace_warehouse))
    assert time.monotonic() - started < 30
    _refused(result, "query stopped after 1 s (--timeout)")
    stopped = run_cli("sql", cross_join, "--warehouse", str(two_trace_warehouse),
                      env={"TRACELAKE_SQL_TIMEOUT_SECONDS": "1"})
    _refused(stopped, "query stopped after 1 s")
    quick = run_cli("sql", "select count(*) as n from traces", "--timeout", "1", "--warehouse", str(two_trace_warehouse))
    assert quick.returncode == 0 and "2" in quick.stdout, quick.stderr
    for bad in ("-1", "nan", "inf"):
        refused = run_cli("sql", "select 1", "--timeout", bad, "--warehouse", str(two_trace_warehouse))
        assert refused.returncode == 2 and "--timeout" in refused.stderr, refused.stderr


def test_build_never_writes_dbt_files_through_a_link(fresh_classic: WarehouseCopy, tmp_path: Path) -> None:
    """dbt writes target/ and logs/ by name: links planted there (or a linked dbt/ folder) are replaced
    or refused, never followed."""
    victims = {name: tmp_path / f"victim_{name}" for name in ("target", "logs")}
    for name, victim in victims.items():
        victim.mkdir()
        (victim / ("manifest.json" if name == "target" else "dbt.log")).write_bytes(PRECIOUS)
        shutil.rmtree(fresh_classic.root / "dbt" / name, ignore_errors=True)
        (fresh_classic.root / "dbt" / name).symlink_to(victim, target_is_directory=True)
    result = run_cli(*fresh_classic.writers["build"])
    assert result.returncode == 0, result.stderr
    for name, victim in victims.items():
        assert [p.name for p in victim.iterdir()] == ["manifest.json" if name == "target" else "dbt.log"]
        assert next(victim.iterdir()).read_bytes() == PRECIOUS
        assert (fresh_classic.root / "dbt" / name).is_dir() and not (fresh_classic.root / "dbt" / name).is_symlink()
    assert (fresh_classic.root / "dbt" / "target" / "manifest.json").stat().st_size > 0
    shutil.rmtree(fresh_classic.root / "dbt")
    (fresh_classic.root / "dbt").symlink_to(victims["target"], target_is_directory=True)
    _refused(run_cli(*fresh_classic.writers["build"]), "symbolic link")
    assert [p.name for p in victims["target"].iterdir()] == ["manifest.json"]
