"""The writers' lock file, opened so that nobody else's file is ever written through it.

Anyone who can write a shared warehouse folder could put a symbolic link (or a hard link, a fifo, a
folder) where `.lock` goes; a writer that opened it by name and rewrote it would empty the file it
points at. So the lock file is opened without following a link, checked on the open descriptor (a
regular file with one name, owned by this user or by the warehouse folder's owner), and only that
descriptor is written, after the lock is held.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from tracelake.core.errors import WarehouseError

# Bytes of the holder's note read back (pid, command, since): far more than json.dumps of it writes.
HOLDER_NOTE_MAX_BYTES = 4096
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class LockFileError(WarehouseError):
    """The lock file's place holds something TraceLake must not write."""


def _refuse(path: Path, what: str) -> LockFileError:
    return LockFileError(f"{path} is {what}, not a lock file TraceLake made; it is left alone (writing it could "
                         "overwrite another file): remove it, then re-run")


_NOT_REGULAR = {errno.ELOOP: "a symbolic link", errno.EISDIR: "a folder",
                errno.ENXIO: "not a regular file (a fifo, a device or a socket)"}  # ENXIO: a socket, or a fifo


def open_regular_file(path: Path, flags: int, refuse: Callable[[Path, str], Exception]) -> int | None:
    """A descriptor of the regular file at `path`, opened without following a link and without
    waiting on a fifo (flags carry O_NOFOLLOW | O_NONBLOCK); None when there is none (and `flags`
    do not create it). Anything else there is refused with `refuse(path, what it is)`."""
    try:
        fd = os.open(path, flags, 0o644)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _NOT_REGULAR:
            raise refuse(path, _NOT_REGULAR[exc.errno]) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refuse(path, _NOT_REGULAR[errno.ENXIO])
    return fd


def _check(path: Path, fd: int) -> None:
    """Refuse, on the open descriptor (no race with a rename), what is not a lock file of ours."""
    info = os.fstat(fd)
    if info.st_nlink != 1:
        raise _refuse(path, f"a hard link ({info.st_nlink} names for one file)")
    folder_owner = os.stat(path.parent).st_uid
    if info.st_uid not in (os.geteuid(), folder_owner):
        raise _refuse(path, f"owned by user {info.st_uid}, who owns neither this process nor the warehouse folder")


def open_lock_file(path: Path) -> int:
    """The descriptor of the lock file at `path`, made if missing; refused with one line when it is a
    link, not a regular file, or someone else's."""
    fd = open_regular_file(path, _OPEN_FLAGS, _refuse)
    if fd is None:  # the folder itself is gone
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(path.parent))
    try:
        _check(path, fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _names_this_file(path: Path, fd: int) -> bool:
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


class LockFile:
    """The writers' lock at `path`: `try_lock` takes it without waiting; `note` says who holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = open_lock_file(path)

    def try_lock(self) -> bool:
        """Take the lock (False when another process holds it). A lock file renamed or removed
        while this one was being opened is opened again: the lock is on the file `path` names."""
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if _names_this_file(self.path, self.fd):
                return True
            os.close(self.fd)
            self.fd = -1
            self.fd = open_lock_file(self.path)

    def write_note(self, note: dict[str, object]) -> None:
        """Say who holds the lock (call it holding the lock: the file was checked when it was opened)."""
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, json.dumps(note).encode(), 0)

    def note(self) -> dict[str, object]:
        """What the holder wrote ({} when nothing readable)."""
        try:
            note = json.loads(os.pread(self.fd, HOLDER_NOTE_MAX_BYTES, 0) or b"{}")
        except (OSError, ValueError):
            return {}
        return note if isinstance(note, dict) else {}

    def release(self) -> None:
        """Clear the note and let the next writer in (the file stays: others may have it open)."""
        try:
            os.ftruncate(self.fd, 0)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
