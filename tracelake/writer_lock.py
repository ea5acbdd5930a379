"""The writers' lock of a warehouse: one writer at a time, re-entrant within a process, waiting
with a word on stderr and giving up after a while with one line naming the holder. The lock file
itself is opened by tracelake/lock_file.py (never through a link, never someone else's file)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracelake.core.errors import WarehouseError
from tracelake.lock_file import LockFile

# A writer waits this long for another writer (`TRACELAKE_WRITER_WAIT_SECONDS` overrides): a model
# update of a 1 GB trace takes ~30 s here (bench/ingest.py), so ten minutes is a stuck writer.
WRITER_WAIT_SECONDS = 600.0
WRITER_WAIT_ENV = "TRACELAKE_WRITER_WAIT_SECONDS"
WRITER_WAIT_NOTICE_SECONDS = 1.0  # waiting longer than this is said on stderr
LOCK_POLL_SECONDS = 0.1
_held_locks: dict[Path, int] = {}  # write locks this process holds, with their nesting depth

def _lock_holder(lock: LockFile) -> str:
    note = lock.note()
    pid, command, since = note.get("pid"), note.get("command"), note.get("since")
    if not isinstance(since, (int, float)) or pid is None or command is None:
        return "another TraceLake writer"
    return f"pid {pid} ({command}, for {time.time() - since:.0f} s)"


def _writer_wait_seconds() -> float:
    try:
        return float(os.environ.get(WRITER_WAIT_ENV, WRITER_WAIT_SECONDS))
    except ValueError:
        raise WarehouseError(f"{WRITER_WAIT_ENV}={os.environ[WRITER_WAIT_ENV]!r} is not a number of seconds") from None


@contextmanager
def hold_writer_lock(root: Path, lock_path: Path, stop_waiting: threading.Event, wait: bool = True) -> Iterator[bool]:
    """Hold the writers' lock of the warehouse `root` (re-entrant in this process). Yields False at
    once when `wait` is off and another writer holds it; else waits for it, saying so on stderr, up to
    WRITER_WAIT_SECONDS, then refuses with one line naming the holder. `stop_waiting` set makes a
    waiting thread give up."""
    if _held_locks.get(lock_path):
        if not wait:  # this process is writing already: what it does, it finishes itself
            yield False
            return
        _held_locks[lock_path] += 1
        try:
            yield True
        finally:
            _held_locks[lock_path] -= 1
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = LockFile(lock_path)  # never through a link, never someone else's file
    except OSError as exc:
        raise WarehouseError(f"cannot take the writers' lock {lock_path} ({exc.strerror}); writing to this "
                             "warehouse needs write access to its folder") from None
    try:
        if not _acquire(root, lock, stop_waiting, wait):
            yield False
            return
        lock.write_note({"pid": os.getpid(), "command": " ".join(sys.argv[:3]), "since": time.time()})
        _held_locks[lock_path] = 1
        try:
            yield True
        finally:
            del _held_locks[lock_path]
            lock.release()
    finally:
        lock.close()


def _acquire(root: Path, lock: LockFile, stop_waiting: threading.Event, wait: bool) -> bool:
    limit = _writer_wait_seconds()
    started = time.monotonic()
    said = False
    while True:
        if lock.try_lock():
            return True
        if not wait:
            return False
        if stop_waiting.is_set():
            raise WarehouseError(f"stopped waiting for the writers' lock of {root}")
        waited = time.monotonic() - started
        if waited > limit:
            raise WarehouseError(f"warehouse {root} is busy: {_lock_holder(lock)} has held it for over "
                                 f"{limit:g} s; let it finish or stop it, then re-run (or raise {WRITER_WAIT_ENV})")
        if waited > WRITER_WAIT_NOTICE_SECONDS and not said:
            print(f"tracelake: waiting for {_lock_holder(lock)} to finish writing {root} "
                  f"(up to {limit:g} s)", file=sys.stderr, flush=True)
            said = True
        time.sleep(LOCK_POLL_SECONDS)
