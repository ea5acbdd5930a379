"""Child processes end with their parent: a killed `tracelake` leaves no decode worker or plot
process behind (Linux: the kernel sends the child SIGKILL when its parent dies)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(expected_parent: int | None = None) -> None:
    """Call in a child right after it starts. `expected_parent`: the pid the parent had; if it is
    already gone (it died before this ran), the child ends at once."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # no prctl: the parent's own clean-up still stops its children
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)
