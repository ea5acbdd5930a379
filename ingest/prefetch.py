"""Read and hash a trace file in a thread while the command imports its libraries.

A command that ingests one file starts `prefetch(path)` before importing DuckDB, pyarrow and
numpy (~0.15 s of start-up on one core); reading and hashing release the GIL, so they run on the
other core meanwhile (55 MB trace: ~0.06 s off the path; bench/ingest.py). Ingest then takes the
bytes with `take_prefetched(path)`, which hands them over only if the file is unchanged since.
Only a regular file within the size limit is read ahead: a FIFO or a device (`/dev/zero`) is left
to ingest, which refuses it without reading it.
"""

from __future__ import annotations

import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from tracelake.core.errors import TraceLakeError
from tracelake.ingest.limits import MAX_TRACE_FILE_BYTES


@dataclass
class _Prefetch:
    path: Path
    identity: tuple[int, int, int, int]  # device, inode, size, mtime_ns when the read started
    thread: threading.Thread | None = None
    data: bytes | None = None
    sha256: str = ""


_pending: list[_Prefetch] = []
_lock = threading.Lock()


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """The identity of a regular file within the size limit; None for anything else."""
    try:
        status = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_TRACE_FILE_BYTES:
        return None
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _read_into(job: _Prefetch) -> None:
    from tracelake.ingest.reader import read_and_hash  # noqa: PLC0415 - here: msgspec stays out of every command's start-up

    try:
        job.data, job.sha256 = read_and_hash(job.path)
    except (OSError, MemoryError, TraceLakeError):
        return  # ingest reads it again and reports the error itself


def prefetch(path: Path) -> None:
    """Start reading and hashing `path` (a regular file) in a daemon thread; no-op otherwise."""
    identity = _identity(path)
    if identity is None:
        return
    job = _Prefetch(path.absolute(), identity)
    job.thread = threading.Thread(target=_read_into, args=(job,), name="trace-prefetch", daemon=True)
    with _lock:
        _pending.append(job)
    job.thread.start()


def take_prefetched(path: Path) -> tuple[bytes, str] | None:
    """The bytes and sha256 of `path` read by `prefetch`, once; None when it was not prefetched,
    could not be read, or changed after the read started."""
    target = path.absolute()
    with _lock:
        job = next((j for j in _pending if j.path == target), None)
        if job is not None:
            _pending.remove(job)
    if job is None:
        return None
    if job.thread is not None:
        job.thread.join()
    data, job.data = job.data, None
    if data is None or _identity(target) != job.identity:
        return None
    return data, job.sha256
