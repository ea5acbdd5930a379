"""Run a command as a child process and measure its wall time and peak RSS (shared by the benches)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MB = 1_000_000
# A run during which other processes kept this share of all cores busy is marked as disturbed: on
# this 2-core machine one busy neighbour (a test run) is 0.5, background daemons stay under 0.05.
DISTURBED_SHARE = 0.15


# A run during which the CPUs sat this share of its wall time waiting for the disk (iowait, all cores)
# is marked as disturbed too: a flush of other writes stalled a 55 MB analyze from ~4 s to 11 s.
DISTURBED_IOWAIT_SHARE = 0.25


def cpu_seconds() -> tuple[float, float]:
    """(busy, iowait) CPU seconds of all processes since boot (/proc/stat); zeros where unreadable."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return 0.0, 0.0
    user, nice, system, _idle, iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq + steal) / tick, iowait / tick


@dataclass(frozen=True)
class Child:
    seconds: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr: str
    cpu_seconds: float = 0.0  # user + system time of the command and the children it waited for
    others_busy_share: float = 0.0  # CPU other processes used meanwhile, as a share of all cores
    iowait_share: float = 0.0  # CPU time spent waiting for the disk, as a share of the wall time

    @property
    def disturbed(self) -> bool:
        """Other processes used more than DISTURBED_SHARE of the machine while this ran, or the disk
        kept it waiting (DISTURBED_IOWAIT_SHARE)."""
        return self.others_busy_share > DISTURBED_SHARE or self.iowait_share > DISTURBED_IOWAIT_SHARE

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
        busy_before, iowait_before = cpu_seconds()
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, env=child_env())
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        cpu = usage.ru_utime + usage.ru_stime
        busy_after, iowait_after = cpu_seconds()
        others = max(0.0, busy_after - busy_before - cpu)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Child(
            seconds=seconds,
            peak_rss_mb=usage.ru_maxrss * 1024 / MB,  # Linux reports KiB
            returncode=proc.returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            cpu_seconds=cpu,
            others_busy_share=others / (max(seconds, 1e-9) * (os.cpu_count() or 1)),
            iowait_share=(iowait_after - iowait_before) / max(seconds, 1e-9),
        )
