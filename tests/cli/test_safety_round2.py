"""Issue 27, second safety round: the writers' lock file is never followed or someone else's,
internal errors become one line, capture folders are not left, concurrent ingests agree, `sql`
stops at its timeout. Everything through the real CLI on real traces."""

from __future__ import annotations

import os
import shutil
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
