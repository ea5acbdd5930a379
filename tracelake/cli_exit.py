"""How a `tracelake` run ends: a stop signal (exit 128 + its number, after the clean-up), a full
disk, a file of another user's (one line, exit 2)."""

from __future__ import annotations

import errno
import os
import signal
import sys
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# Signals that end a run as Ctrl-C does: what `timeout`, CI cancellation and Kubernetes send, and a
# closed terminal. The exit code is 128 + the signal's number, as shells report it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
DISK_FULL_TEXT = ("no space left on device", "disk quota exceeded")
stop_state: dict[str, int | None] = {"stopped_by": None}  # the signal that stopped this run, if any


class Stopped(BaseException):
    """A stop signal arrived: raised in the main thread, so every `finally` and clean-up runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def on_stop_signal(signum: int, _frame: object) -> None:
    if stop_state.get("stopped_by") is None:
        stop_state["stopped_by"] = signum
        raise Stopped(signum)
    # a second signal during the clean-up the first one started: let the clean-up finish


def install_stop_handlers() -> dict[int, object]:
    """Our handlers in, the caller's returned (to put back when an in-process call ends)."""
    previous: dict[int, object] = {}
    for signum in STOP_SIGNALS:
        try:
            previous[signum] = signal.signal(signum, on_stop_signal)
        except (ValueError, OSError):  # not the main thread (an embedding caller): keep its handlers
            break
    return previous


def exit_stopped(signum: int) -> None:
    name = signal.Signals(signum).name
    print(f"tracelake: stopped by {name}; nothing half-written was kept (the warehouse and output folders are "
          "as before, or complete)", file=sys.stderr)
    sys.exit(128 + signum)


def disk_full(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in DISK_FULL_ERRNOS:
            return True
        if any(text in str(seen).lower() for text in DISK_FULL_TEXT):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def permission_denied(exc: PermissionError) -> str:
    """Which file or folder this user may not change, and whose it is."""
    where = Path(os.fsdecode(exc.filename)) if exc.filename is not None else None
    if where is None:
        return f"permission denied ({exc.strerror}); check the permissions of the warehouse and output folders"
    folder = where if where.is_dir() else where.parent
    try:
        owner = f" (it belongs to user {folder.stat().st_uid})"
    except OSError:
        owner = ""
    return (f"permission denied on {where}: this user cannot write {folder}{owner}; run as its owner, "
            "or have them open its permissions")


def exit_if_stopped() -> None:
    """An error raised while a stop signal was being handled is the stop, not a failure."""
    stopped = stop_state.get("stopped_by")
    if stopped is not None:
        exit_stopped(stopped)


def exit_if_disk_full(exc: BaseException) -> None:
    if not disk_full(exc):
        return
    where = getattr(exc, "filename", None)
    print(f"tracelake: error: disk full{f' writing {where}' if where else ''}: no space left on the device; "
          "free some space (or use --warehouse / --out on another disk) and re-run", file=sys.stderr)
    sys.exit(EXIT_BAD_INPUT)
