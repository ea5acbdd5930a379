"""Private staging folders: built beside their target, locked by their owner, removed when dead.

A staging folder lives beside what it becomes (same file system, so moving it in is a rename). The
process that made it holds a lock (flock) on the `.owner` file inside it for as long as it lives;
forked children inherit the lock. A staging folder whose lock is free belongs to a dead run, and the
next run removes it. The lock is taken on a file opened for writing, not on the folder itself, so
that it also works where flock is emulated with POSIX record locks (NFS).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracelake.cli_exit import STOP_SIGNALS

STAGING_PREFIX = ".tracelake-staging-"
OWNER_FILE = ".owner"
# A staging folder is made, then its owner file: one without it is taken for dead only once it is
# older than this (made by a run that died in between; seconds are far more than that step takes).
OWNERLESS_GRACE_SECONDS = 60.0
_DEAD_WITHOUT_OWNER = -1
NAME_MAX_BYTES = 255  # a file name's limit on Linux file systems (ext4, xfs, btrfs, tmpfs: NAME_MAX)
NAME_HASH_CHARS = 10  # hex digits of the hash that keeps clipped names apart


def _lock_owner(folder: Path, create: bool) -> int:
    # never through a link, and never blocking on a fifo someone put in a folder named like ours
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT | os.O_EXCL if create else 0)
    handle = os.open(folder / OWNER_FILE, flags, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(handle)
        raise
    return handle


def _dead(folder: Path) -> int | None:
    """A lock on `folder` if its owner is gone (the caller releases it with `_release`), else None."""
    try:
        return _lock_owner(folder, create=False)
    except FileNotFoundError:
        try:
            ownerless_for = time.time() - folder.stat().st_mtime
        except OSError:
            return None  # gone meanwhile
        return _DEAD_WITHOUT_OWNER if ownerless_for > OWNERLESS_GRACE_SECONDS else None
    except OSError:
        return None  # alive (locked), or not a staging folder of ours


def _release(handle: int) -> None:
    if handle != _DEAD_WITHOUT_OWNER:
        os.close(handle)


def _candidates(parent: Path) -> list[Path]:
    try:
        return [entry for entry in parent.iterdir()
                if entry.name.startswith(STAGING_PREFIX) and entry.is_dir() and not entry.is_symlink()]
    except OSError:
        return []


def has_dead_staging(parent: Path) -> bool:
    for folder in _candidates(parent):
        handle = _dead(folder)
        if handle is not None:
            _release(handle)
            return True
    return False


def remove_dead_staging(parent: Path) -> int:
    """Remove the staging folders in `parent` whose owner is gone (their lock is free)."""
    removed = 0
    for folder in _candidates(parent):
        handle = _dead(folder)
        if handle is None:
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
        finally:
            _release(handle)
    return removed


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Deliver a stop signal only after the block: a folder made inside it is also recorded (and so
    removed by the stop's clean-up), never made and then forgotten by a stop between the two."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class StagingFolder:
    """A locked, private folder for building something in `parent`, removed on close. With
    `clean`, the dead runs' staging folders in `parent` are removed first."""

    def __init__(self, parent: Path, label: str, clean: bool = True) -> None:
        parent.mkdir(parents=True, exist_ok=True)
        if clean:
            remove_dead_staging(parent)
        with stop_signals_held():
            self.path = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{label}-", dir=parent))
            try:
                self._lock = _lock_owner(self.path, create=True)
            except BaseException:
                shutil.rmtree(self.path, ignore_errors=True)
                raise

    def __enter__(self) -> StagingFolder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1


def fit_name(stem: str, suffix: str = "") -> str:
    """`stem + suffix` as a file name, its stem clipped to fit NAME_MAX bytes with a short hash of the
    whole stem kept in its place, so that two long names still get two names."""
    name = stem + suffix
    if len(os.fsencode(name)) <= NAME_MAX_BYTES:
        return name
    tag = "-" + hashlib.sha256(os.fsencode(stem)).hexdigest()[:NAME_HASH_CHARS]
    room = NAME_MAX_BYTES - len(os.fsencode(suffix + tag))
    clipped = os.fsencode(stem)[:room].decode("utf-8", "ignore")  # never half a character
    return clipped + tag + suffix


def replace_file(path: Path, data: bytes, durable: bool = False) -> None:
    """Write `data` beside `path` and rename it over: a reader sees the old file or the whole new
    one, and nothing is left behind when the write fails. `durable` syncs the file before the rename
    and the folder after it, so a power cut keeps the new file (journals of intent)."""
    temporary = path.with_name(fit_name(f".{path.name}", f".{uuid.uuid4().hex[:8]}.tmp"))
    try:
        # a new file of our own (a link or file planted under the name is refused, never written through)
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            if durable:
                stream.flush()
                os.fsync(stream.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    if durable:
        sync_folder(path.parent)


def sync_folder(folder: Path) -> None:
    """fsync a folder, so the renames and unlinks in it survive a power cut."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def dead_staging(parent: Path, label: str) -> Iterator[Path]:
    """The staging folders of `label` in `parent` whose owner is gone, each locked while the caller
    handles it (it may read, finish or remove it)."""
    for folder in _candidates(parent):
        if not folder.name.startswith(f"{STAGING_PREFIX}{label}-"):
            continue
        handle = _dead(folder)
        if handle is None:
            continue
        try:
            yield folder
        finally:
            _release(handle)
