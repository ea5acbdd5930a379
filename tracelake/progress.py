"""A progress bar on stderr (bytes of trace files done, and the current stage), TTY only."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tracelake.ingestion import TraceOutcome


class ProgressBar:
    """rich progress over the bytes of the files to ingest; does nothing when disabled."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress = None
        self._task = None

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def started(self, total_bytes: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("ingesting", total=total_bytes)

    def finished(self, outcome: TraceOutcome, size_bytes: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=size_bytes, description=f"{outcome.status}: {outcome.path.name}")

    def stage(self, description: str) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task(description, total=None)
        else:
            self._progress.update(self._task, description=description)
