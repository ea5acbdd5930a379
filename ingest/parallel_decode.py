"""Decode one trace's events on several cores.

The event list is split into contiguous ranges. Forked workers inherit the parsed document
(copy-on-write, nothing is sent to them), each decodes one range and writes its own
`events/part-<i>.parquet`; only the much smaller host, GPU and flow subsets come back, through a
file beside the trace's tables.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from pathlib import Path

import msgspec

from ingest.decode import CHUNK_EVENTS, EVENT_SCHEMA, DecodedTrace, decode_events, merge_decoded
from ingest.parquet_io import open_writer

# Below this many events a second process costs more (fork, result transfer) than it saves.
MIN_EVENTS_PER_WORKER = CHUNK_EVENTS

_inherited_events: list[msgspec.Raw] = []


def _decode_range(first: int, stop: int, events_dir: Path, part: int) -> DecodedTrace:
    with open_writer(events_dir, EVENT_SCHEMA, part) as writer:
        return decode_events(_inherited_events, writer.write_batch, first, stop)


def _ranges(count: int, workers: int) -> list[tuple[int, int]]:
    per_worker = max(1, -(-count // workers))
    return [(start, min(start + per_worker, count)) for start in range(0, count, per_worker)]


def _fork_decode(first: int, stop: int, events_dir: Path, part: int, result: Path) -> int:
    """Decode the range in a forked child that pickles its DecodedTrace (or its exception) to
    `result`; returns the child's pid."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        try:
            outcome: object = _decode_range(first, stop, events_dir, part)
            status = 0
        except Exception as error:  # noqa: BLE001 - handed to the parent, which raises it
            outcome = error
        with result.open("wb") as handle:
            pickle.dump(outcome, handle, protocol=pickle.HIGHEST_PROTOCOL)
    finally:
        os._exit(status)  # no atexit handlers or buffered output of the parent run twice


def _collect(pid: int, result: Path, part: int) -> DecodedTrace:
    _, status = os.waitpid(pid, 0)
    try:
        with result.open("rb") as handle:
            outcome = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        raise RuntimeError(f"decode worker {part} ended without a result (wait status {status})") from None
    finally:
        result.unlink(missing_ok=True)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def decode_to_parquet(raw_events: list[msgspec.Raw], events_dir: Path, workers: int,
                      while_workers_run: Callable[[], None] | None = None) -> DecodedTrace:
    """Decode all events, writing the `events` table under `events_dir`. `while_workers_run` is
    called once the workers are forked (only then, so they do not inherit what it sets up)."""
    usable_workers = min(workers, max(1, len(raw_events) // MIN_EVENTS_PER_WORKER))
    if multiprocessing.current_process().daemon:  # already a pool worker: no children allowed
        usable_workers = 1
    ranges = _ranges(len(raw_events), usable_workers)
    global _inherited_events
    _inherited_events = raw_events
    try:
        if len(ranges) == 1:
            return _decode_range(0, len(raw_events), events_dir, 0)
        # Every range is decoded in a forked worker, this process only waits: the millions of
        # short-lived objects of a decode then never fragment its heap, which holds the warehouse
        # update and the analysis next (55 MB trace: -17 MB peak RSS; bench/analyze.py).
        results = [events_dir.parent / f".decoded-{part}.pickle" for part in range(len(ranges))]
        pids = [_fork_decode(first, stop, events_dir, part, results[part])
                for part, (first, stop) in enumerate(ranges)]
        if while_workers_run is not None:
            while_workers_run()
        parts: list[DecodedTrace] = []
        errors: list[BaseException] = []
        for part, (pid, result) in enumerate(zip(pids, results)):
            try:  # every child is waited for, even after one failed
                parts.append(_collect(pid, result, part))
            except Exception as error:  # noqa: BLE001 - the first one is raised below
                errors.append(error)
        if errors:
            raise errors[0]
        return merge_decoded(parts)
    finally:
        _inherited_events = []
