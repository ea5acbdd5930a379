"""The trace read and hashed in a thread while the command imports its libraries."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from tests.conftest import TRACES
from tracelake.ingest.limits import MAX_TRACE_FILE_BYTES
from tracelake.ingest.prefetch import prefetch, take_prefetched

TRACE = TRACES / "torch_compile_triton" / "trace.json.gz"


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / TRACE.name
    shutil.copyfile(TRACE, target)
    return target


def test_prefetched_bytes_and_hash_are_the_files(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    prefetch(trace)
    taken = take_prefetched(trace)
    assert taken is not None
    data, sha256 = taken
    assert data == trace.read_bytes()
    assert sha256 == hashlib.sha256(trace.read_bytes()).hexdigest()


def test_prefetched_bytes_are_handed_over_once(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    prefetch(trace)
    assert take_prefetched(trace) is not None
    assert take_prefetched(trace) is None


def test_a_file_changed_after_the_read_started_is_read_again(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    prefetch(trace)
    with trace.open("ab") as handle:
        handle.write(b"\n")
    stat = trace.stat()
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert take_prefetched(trace) is None


def test_nothing_is_prefetched_for_a_folder_a_missing_file_or_another_path(tmp_path: Path) -> None:
    trace = _copy(tmp_path)
    prefetch(tmp_path)
    prefetch(tmp_path / "missing.json")
    assert take_prefetched(tmp_path) is None
    assert take_prefetched(tmp_path / "missing.json") is None
    prefetch(trace)
    assert take_prefetched(tmp_path / "other.json") is None
    assert take_prefetched(trace) is not None


def test_fifos_devices_and_files_above_the_limit_are_not_read_ahead(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # nobody writes: a read-ahead that opened it would block for good
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(MAX_TRACE_FILE_BYTES + 1)  # sparse
    for path in (fifo, Path("/dev/zero"), huge):
        prefetch(path)
        assert take_prefetched(path) is None, path
