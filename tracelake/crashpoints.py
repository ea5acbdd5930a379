"""Named points at which a test can kill the running command, to prove that a kill anywhere leaves a
warehouse the next command repairs (tests/test_crash_consistency.py).

`TRACELAKE_CRASH_AT=<point>` makes the process SIGKILL itself on reaching that point: no clean-up,
no exception handler and no `finally` runs, as with a real `kill -9` or a power cut of the process.
"""

from __future__ import annotations

import os
import signal

CRASH_AT_ENV = "TRACELAKE_CRASH_AT"


def crash_point(name: str) -> None:
    if os.environ.get(CRASH_AT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
