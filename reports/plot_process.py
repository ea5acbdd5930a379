"""Draw perf_improvement.png in a child interpreter that is started when an analysis begins.

Importing matplotlib costs about a quarter of a second and tens of MB; the child pays that while
the ingest runs, then waits for the ranked findings on stdin and answers with the PNG on stdout.
If the child fails for any reason the plot is drawn in this process instead, so the report never
depends on the child.

    python -m tracelake.reports.plot_process < request.json > plot.png
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.contracts import PriorityData
from tracelake.ingest.process_lifetime import die_with_parent

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PlotRequest(BaseModel):
    priority: PriorityData
    gpu_utilization: dict[str, Any]


def _stop(child: subprocess.Popen[bytes]) -> None:
    child.kill()
    child.wait()


class PlotProcess:
    def __init__(self) -> None:
        try:
            self._child: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "tracelake.reports.plot_process", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        except OSError:
            self._child = None
        self._request: PlotRequest | None = None
        self._writer: threading.Thread | None = None

    def submit(self, priority: PriorityData, gpu_utilization: dict[str, Any]) -> None:
        """Hand the child its request; it draws while this process goes on with the next steps.
        The request is written from a thread: the child reads it only once matplotlib is imported,
        and a request larger than the pipe buffer must not block the analysis meanwhile."""
        self._request = PlotRequest(priority=priority, gpu_utilization=gpu_utilization)
        child = self._child
        if child is None or child.stdin is None:
            return
        payload = self._request.model_dump_json().encode()

        def write() -> None:
            stdin = child.stdin
            try:
                if stdin is not None:
                    stdin.write(payload)
                    stdin.close()
            except (OSError, ValueError):
                pass  # the child is gone: _collect() sees it fail and the plot is drawn here
            child.stdin = None  # closed here; communicate() must not flush it again

        self._writer = threading.Thread(target=write, name="plot-request", daemon=True)
        self._writer.start()

    def result(self) -> bytes:
        """The PNG of the submitted request: from the child, else drawn here."""
        if self._request is None:
            raise RuntimeError("PlotProcess.result() before submit()")
        png = self._collect()
        if png is None:
            from tracelake.reports.plot import perf_improvement_png  # noqa: PLC0415 - matplotlib only when needed

            png = perf_improvement_png(self._request.priority, self._request.gpu_utilization)
        return png

    def _collect(self) -> bytes | None:
        child, self._child = self._child, None
        if child is None or child.stdout is None:
            return None
        if self._writer is not None:
            self._writer.join(settings.PLOT_TIMEOUT_SECONDS)
        if child.stdin is not None:  # the request never went out
            _stop(child)
            return None
        try:
            png, _ = child.communicate(timeout=settings.PLOT_TIMEOUT_SECONDS)
        except (subprocess.TimeoutExpired, OSError):
            _stop(child)
            return None
        return png if child.returncode == 0 and png.startswith(PNG_SIGNATURE) else None

    def close(self) -> None:
        """Stop a child that was never asked for a plot (the analysis failed before the report)."""
        child, self._child = self._child, None
        if child is not None:
            _stop(child)


def main() -> None:
    die_with_parent(int(sys.argv[1]) if len(sys.argv) > 1 else None)
    os.nice(settings.PLOT_CHILD_NICENESS)
    from tracelake.reports.plot import perf_improvement_png  # noqa: PLC0415 - imported before the request arrives

    # no warm-up drawing: it took 0.09 s of CPU from the analysis and made the real one no faster
    request = PlotRequest.model_validate_json(sys.stdin.buffer.read())
    sys.stdout.buffer.write(perf_improvement_png(request.priority, request.gpu_utilization))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
    # The analysis waits for this process to end: skip tearing down matplotlib (~0.1 s), nothing
    # is left to clean up once the PNG is out.
    os._exit(0)
