"""Open a page in headless Chromium: a screenshot or the DOM after scripts ran, and the page's console.

With `--enable-logging=stderr --v=1`, Chromium writes each console message of the page to stderr as
`[...:INFO:CONSOLE:<line>] "<message>", source: <url> (<line>)`; an uncaught exception is a console
message that starts with "Uncaught". `console_messages` picks those lines out.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_CONSOLE_LINE = re.compile(r":CONSOLE[:(]|Uncaught")


@dataclass(frozen=True)
class BrowserRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def console_messages(self) -> list[str]:
        return console_messages(self.stderr)


def browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def console_messages(stderr: str) -> list[str]:
    """The page's console lines (logs, errors, uncaught exceptions) in Chromium's stderr log."""
    return [line for line in stderr.splitlines() if _CONSOLE_LINE.search(line)]


SCRIPT_TIME_MS = 10_000  # virtual time the page's scripts get before the DOM dump or screenshot (charts draw async)


def open_page(page: Path, *, screenshot: Path | None = None, window: tuple[int, int] = (1400, 2200),
              timeout: float = 120) -> BrowserRun:
    """Load page (a local file) once: the DOM after scripts ran on stdout, or a PNG to screenshot."""
    binary = browser()
    if binary is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="tracelake-chromium-") as profile:
        action = [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        command = [
            binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--disable-extensions", "--hide-scrollbars", f"--user-data-dir={profile}",
            "--enable-logging=stderr", "--v=1", f"--window-size={window[0]},{window[1]}",
            f"--virtual-time-budget={SCRIPT_TIME_MS}",
            *action, page.resolve().as_uri(),
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, errors="replace")
    return BrowserRun(done.returncode, done.stdout, done.stderr)


def with_script(html: str, snippet: str) -> str:
    """The page with snippet added at the end of its body (the last `</body>`: the inlined chart
    bundles hold that text inside their scripts)."""
    head, tag, tail = html.rpartition("</body>")
    return head + snippet + tag + tail


def page_height(page: Path, width: int = 1400) -> int:
    """The page's full height in CSS pixels at this width (measured on a scratch copy)."""
    probe = page.with_name(f".height-probe-{page.name}")
    html = page.read_text(encoding="utf-8")
    marker = "<script>document.title = 'height=' + document.documentElement.scrollHeight;</script>"
    probe.write_text(with_script(html, marker), encoding="utf-8")
    try:
        run = open_page(probe, window=(width, 1000))
    finally:
        probe.unlink(missing_ok=True)
    found = re.search(r"<title>height=(\d+)</title>", run.stdout)
    if not found:
        raise RuntimeError(f"could not measure {page}: {run.stderr[-500:]}")
    return int(found.group(1))
