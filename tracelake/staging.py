"""Private staging folders: built beside their target, locked by their owner, removed when dead.

A staging folder lives beside what it becomes (same file system, so moving it in is a rename) and is
locked (flock) by the process that made it for as long as that process lives; forked children
inherit the lock. A staging folder whose lock is free belongs to a dead run: the next run removes it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

STAGING_PREFIX = ".tracelake-staging-"
UNNAMED_PREFIX = ".tracelake-new-"  # a staging folder between its making and its locking


def lock_folder(folder: Path) -> int:
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(handle)
        raise
    return handle


def _dead(folder: Path) -> int | None:
    """A lock on `folder` if its owner is gone (the caller closes it), else None."""
    try:
        return lock_folder(folder)
    except OSError:
        return None  # alive (locked), not a folder, or gone meanwhile


def _candidates(parent: Path) -> list[Path]:
    try:
        return [entry for entry in parent.iterdir() if entry.name.startswith((STAGING_PREFIX, UNNAMED_PREFIX))]
    except OSError:
        return []


def has_dead_staging(parent: Path) -> bool:
    for folder in _candidates(parent):
        handle = _dead(folder)
        if handle is not None:
            os.close(handle)
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
            os.close(handle)
    return removed


class StagingFolder:
    """A locked, private folder for building `target` (or other work), removed on close."""

    def __init__(self, parent: Path, label: str) -> None:
        parent.mkdir(parents=True, exist_ok=True)
        remove_dead_staging(parent)
        # made under a name no cleaner looks at, locked, then given its staging name
        unnamed = Path(tempfile.mkdtemp(prefix=UNNAMED_PREFIX, dir=parent))
        self._lock = lock_folder(unnamed)
        self.path = parent / f"{STAGING_PREFIX}{label}-{unnamed.name.removeprefix(UNNAMED_PREFIX)}"
        os.rename(unnamed, self.path)

    def __enter__(self) -> StagingFolder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1
