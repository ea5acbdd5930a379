"""Issue 27, second safety round: the writers' lock file is never followed or someone else's,
internal errors become one line, capture folders are not left, concurrent ingests agree, `sql`
stops at its timeout. Everything through the real CLI on real traces."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE
from tests.conftest import TRACES, run_cli

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


@pytest.fixture(scope="module")
def two_trace_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small traces (rm refuses to empty a warehouse): copied by each test that writes."""
    folder = tmp_path_factory.mktemp("two_traces") / "wh"
    result = run_cli("ingest", str(SMALL_TRACE), str(SECOND_TRACE), "--warehouse", str(folder), "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


@dataclass(frozen=True)
class WarehouseCopy:
    root: Path
    writers: dict[str, tuple[str, ...]]  # each writer command's arguments, against `root`


@pytest.fixture
def fresh(two_trace_warehouse: Path, tmp_path: Path) -> WarehouseCopy:
    """A copy of the two-trace warehouse, with one command line per writer."""
    root = tmp_path / "wh"
    shutil.copytree(two_trace_warehouse, root)
    trace_id = _trace_id(two_trace_warehouse, SMALL_TRACE)  # a content hash: the same in the copy
    where = ("--warehouse", str(root))
    return WarehouseCopy(root, {
        "ingest": ("ingest", str(THIRD_TRACE), "--quiet", *where),
        "analyze": ("analyze", str(SMALL_TRACE), "--out", str(tmp_path / "report"), "--quiet", *where),
        "tag": ("tag", trace_id, "run=probe", *where),
        "rm": ("rm", trace_id, *where),
        "build": ("build", "--quiet", *where),
    })


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
