"""Progress on stderr (TTY only): bytes of trace files decoded with an ETA, then the stage a run is
in, in words a user knows; for `build`, dbt's nodes done of all."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from tracelake.ingestion import TraceOutcome


NODE_NAME_WIDTH = 40  # characters of a dbt node's name shown: longer ones (data tests) squeeze the bar out


class ProgressBar:
    """rich progress over the bytes of the files to ingest; does nothing when disabled."""

    def __init__(self, enabled: bool, counting: bool = False) -> None:
        self.enabled = enabled
        self.counting = counting  # counts nodes (`build`), not bytes
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._shown: dict[Path, int] = {}  # bytes of a file counted while it was decoding

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            from rich.console import Console  # noqa: PLC0415 - rich only when a bar is shown
            from rich.progress import (  # noqa: PLC0415
                BarColumn,
                DownloadColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            progress = self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn() if self.counting else DownloadColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            progress.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def started(self, total_bytes: int) -> None:
        if self._progress is not None:
            self._task = self._progress.add_task("reading traces", total=total_bytes)

    def decoding(self, path: Path, share: float) -> None:
        if self._progress is None or self._task is None:
            return
        size = path.stat().st_size
        shown = int(size * min(1.0, share))
        self._progress.update(self._task, advance=shown - self._shown.get(path, 0), description=f"decoding {path.name}")
        self._shown[path] = shown

    def finished(self, outcome: TraceOutcome, size_bytes: int) -> None:
        if self._progress is not None and self._task is not None:
            already = self._shown.pop(outcome.path, 0)
            self._progress.update(self._task, advance=size_bytes - already,
                                  description=f"{outcome.status}: {outcome.path.name}")

    def stage(self, description: str) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task(description, total=None)
        else:
            self._progress.update(self._task, description=description)

    def node_done(self, done: int, total: int, name: str) -> None:
        """dbt finished its `done`th node of `total` (`tracelake build`)."""
        if self._progress is None:
            return
        description = f"dbt build: {name[:NODE_NAME_WIDTH]}" if name else "dbt build"
        if self._task is None:
            self._task = self._progress.add_task(description, total=total)
        self._progress.update(self._task, completed=done, total=total, description=description)
