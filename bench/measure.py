"""Run a command as a child process and measure its wall time and peak RSS (shared by the benches)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

MB = 1_000_000


@dataclass(frozen=True)
class Child:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str

    def failure(self, what: str) -> str:
        how = f"killed by signal {-self.returncode}" if self.returncode < 0 else f"exit {self.returncode}"
        tail = (self.stderr.strip() or self.stdout.strip())[-2000:]
        return f"{what} failed ({how}) after {self.seconds:.2f} s, peak RSS {self.peak_rss_mb:.0f} MB: {tail}"


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["DO_NOT_TRACK"] = "1"
    return env


def copy_warehouse(tracelake: str, warm: os.PathLike[str], folder: os.PathLike[str]) -> None:
    """Copy a warmed-up warehouse to `folder` and let one untimed command re-point its views there,
    as the first command on a moved warehouse does: the timed run then starts as a user's would."""
    shutil.copytree(warm, folder)
    primed = run_child([tracelake, "traces", "--warehouse", os.fspath(folder)])
    if primed.returncode != 0:
        raise SystemExit(primed.failure("tracelake traces on the copied warehouse"))


def run_child(cmd: Sequence[str]) -> Child:
    """Run `cmd`, wall-clock it and read its peak RSS from the kernel's rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=child_env())
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Child(
            seconds=seconds,
            peak_rss_mb=usage.ru_maxrss * 1024 / MB,  # Linux reports KiB
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
        )
