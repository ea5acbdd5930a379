"""Run a compiled plan's statements on several DuckDB cursors, each after the statements it reads.

A model statement over a small trace is mostly single-threaded binding and optimizing of a large
query (the 2.5 k-event BERT trace: ~70 statements, 1.15-1.47 s one after another), so two cursors
on two cores take 0.68-0.91 s. It only runs on a private copy of the database (a writer's
snapshot, published by a rename when everything succeeded), so the statements need no shared
transaction: a failure discards the copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

import duckdb

from tracelake.memory import MemoryReleaser


@dataclass(frozen=True)
class PlanStep:
    key: str  # the relation it writes
    depends_on: tuple[str, ...]  # keys of steps that must finish first (other keys are ignored)
    run: Callable[[duckdb.DuckDBPyConnection], None]
    heavy: bool = True  # reads trace data (memory is handed back after it), or only defines a view


def run_steps(con: duckdb.DuckDBPyConnection, steps: Sequence[PlanStep], workers: int) -> None:
    """Run every step on a cursor of `con` once its dependencies are done, `workers` at a time.
    The first failure stops new steps; the running ones finish, then it is raised."""
    keys = {step.key for step in steps}
    waiting = {step.key: {d for d in step.depends_on if d in keys and d != step.key} for step in steps}
    by_key = {step.key: step for step in steps}
    memory = MemoryReleaser()
    done: set[str] = set()
    running: dict[Future[None], str] = {}
    error: BaseException | None = None

    def execute(step: PlanStep) -> None:
        cursor = con.cursor()
        try:
            step.run(cursor)
        finally:
            cursor.close()

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="plan") as pool:
        while True:
            if error is None:
                ready = [key for key, needs in waiting.items() if needs <= done]
                for key in ready:  # in plan order: waiting keeps the steps' order
                    del waiting[key]
                    running[pool.submit(execute, by_key[key])] = key
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                key = running.pop(future)
                if future.exception() is not None:
                    error = error or future.exception()
                    continue
                done.add(key)
                if by_key[key].heavy:
                    memory.step_done()
    if error is not None:
        raise error
    if waiting:
        raise RuntimeError(f"plan steps wait on each other: {sorted(waiting)}")
