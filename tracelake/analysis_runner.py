"""Runs a declared sequence of analysis steps (after Kedro's pipelines of nodes): each step is a
function whose arguments are named outputs of earlier steps (or the run's inputs), and whose
result is stored under its own output name. One runner owns what the steps share besides data: the
report's staging folder and run metadata, the timing of each step, the memory released between
heavy steps, the worker threads of background steps and the plot process."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
from pydantic import BaseModel

from tracelake.analyzers.contracts import PriorityData
from tracelake.memory import release_free_memory
from tracelake.reports.plot_process import PlotProcess
from tracelake.run_contracts import RunMetadata, StepTiming


@dataclass(frozen=True)
class Step:
    name: str  # as run.json names it
    function: Callable[..., Any]
    inputs: tuple[str, ...] = ()
    output: str | None = None
    label: str | None = None  # what the progress display shows while it runs (None: nothing)
    background: bool = False  # runs on a worker thread; a step that reads its output waits for it
    after: tuple[str, ...] = ()  # outputs it waits for without reading them (no query stream beside it)
    releases_memory: bool = False  # gives freed memory back to the system when done

    def __post_init__(self) -> None:
        parameters = tuple(inspect.signature(self.function).parameters)
        if parameters != self.inputs:  # the names wire the steps: a reader can follow each by its name
            raise ValueError(f"step {self.name!r}: inputs {self.inputs} are not the parameters {parameters} "
                             f"of {self.function.__qualname__}")


def check_wiring(steps: Sequence[Step], inputs: set[str]) -> None:
    """Every step reads only the run's `inputs` and the outputs of the steps before it."""
    known = set(inputs)
    for step in steps:
        missing = [name for name in step.inputs + step.after if name not in known]
        if missing:
            raise ValueError(f"step {step.name!r} reads {', '.join(missing)}, which no earlier step writes")
        known |= {step.output} if step.output is not None else set()


class AnalysisRunner:
    """The steps of one analysis, and what they share: the staging folder, the metadata, warnings."""

    def __init__(self, metadata: RunMetadata, staging: Path, on_stage: Callable[[str], None]) -> None:
        self.metadata = metadata
        self.staging = staging
        self.warnings: list[str] = []
        self._on_stage = on_stage
        self._plot = PlotProcess()  # imports matplotlib in a child process while the trace is ingested
        # the background steps read only the marts, beside this thread's DuckDB work (GIL released)
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="beside-perf-report")
        self._labels: dict[int, str] = {}
        self._connections: list[duckdb.DuckDBPyConnection] = []

    def run(self, steps: Sequence[Step], catalog: dict[str, Any]) -> dict[str, Any]:
        """Every step in order; the read-only connections the steps opened are closed at the end."""
        try:
            for step in steps:
                for name in step.after:
                    self._value(catalog, name)
                arguments = [self._value(catalog, name) for name in step.inputs]
                if step.background:
                    future = self._workers.submit(self._timed, step, arguments)
                    self._labels[id(future)] = step.label or step.name
                    result: Any = future
                else:
                    if step.label is not None:
                        self._on_stage(step.label)
                    result = self._timed(step, arguments)
                if step.output is not None:
                    catalog[step.output] = result
            return {name: self._value(catalog, name) for name in catalog}
        finally:
            for connection in self._connections:
                connection.close()

    def _value(self, catalog: dict[str, Any], name: str) -> Any:
        value = catalog[name]
        if isinstance(value, Future):
            self._on_stage(self._labels.get(id(value), name))
            value = catalog[name] = value.result()
        return value

    def _timed(self, step: Step, arguments: list[Any]) -> Any:
        with self.timed(step.name):
            result = step.function(*arguments)
        if step.releases_memory:
            release_free_memory()
        return result

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = datetime.now(UTC)
        clock = time.perf_counter()
        try:
            yield
        finally:
            self.metadata.steps.append(StepTiming(
                step=name, started_at=started, finished_at=datetime.now(UTC),
                seconds=round(time.perf_counter() - clock, 4),
            ))

    def finish(self) -> None:
        """The final metadata/run.json: every step's timing, the warnings."""
        self.metadata.finished_at = datetime.now(UTC)
        self.metadata.warnings = list(self.warnings)
        self.write("metadata/run.json", self.metadata)

    def keep_open(self, connection: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
        """A connection the steps share, closed when they are done."""
        self._connections.append(connection)
        return connection

    def write(self, relative: str, model: BaseModel | str | bytes) -> None:
        path = self.staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(model, BaseModel):
            path.write_text(model.model_dump_json(indent=2))
        elif isinstance(model, bytes):
            path.write_bytes(model)
        else:
            path.write_text(model)

    def draw_plot(self, priority: PriorityData, gpu_utilization: dict[str, Any]) -> None:
        """Starts the improvement plot in the plot process; `plot_png` waits for it."""
        self._plot.submit(priority, gpu_utilization)

    def plot_png(self) -> bytes:
        return self._plot.result()

    def close(self) -> None:
        self._workers.shutdown(wait=True)
        self._plot.close()
