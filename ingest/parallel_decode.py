"""Decode one trace's events on several cores.

The event list is split into contiguous ranges, a few per worker. Forked workers inherit the parsed
document and the trace's window (copy-on-write, nothing is sent to them) and take the ranges one at
a time from a pipe, so a worker slowed by other work in the process takes fewer of them. Each
range is written as its own `events/part-<i>.parquet`; only the much smaller host, GPU and flow
subsets come back, through a file per worker beside the trace's tables.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from tracelake.ingest.decode import (
    CHUNK_EVENTS,
    EVENT_SCHEMA,
    DecodedTrace,
    TraceWindow,
    decode_events,
    merge_decoded,
    trace_window,
)
from tracelake.ingest.event_list import window_sample
from tracelake.ingest.event_variants import BeginEndPairs, pair_begin_end
from tracelake.ingest.parquet_io import open_writer
from tracelake.ingest.process_lifetime import die_with_parent

# Below this many events a second process costs more (fork, result transfer) than it saves.
MIN_EVENTS_PER_WORKER = CHUNK_EVENTS
# Ranges per worker: with one range each, the worker sharing its core with the warehouse opening
# finished up to 0.1 s after the other (55 MB trace, 2 cores). Interleaved runs against one range
# each: 3 per worker -0.01 s, 6 per worker -0.035 s ingest and -0.08 s analyze (bench/ingest.py).
RANGES_PER_WORKER = 6
_MAX_RANGES = 256  # range indexes travel through the pipe as single bytes

_inherited_events: Sequence[msgspec.Raw] = []
# A worker that cannot write its result exits with the write's errno (below this), else 1.
RESULT_UNWRITTEN_STATUS_LIMIT = 126
_inherited_window: TraceWindow | None = None  # where the whole trace's events can lie
_inherited_pairs: BeginEndPairs | None = None  # the whole trace's B/E pairs, on the pairing pass


def _decode_range(first: int, stop: int, events_dir: Path, part: int) -> DecodedTrace:
    with open_writer(events_dir, EVENT_SCHEMA, part) as writer:
        return decode_events(_inherited_events, writer.write_batch, first, stop, _inherited_window, _inherited_pairs)


def _ranges(count: int, parts: int) -> list[tuple[int, int]]:
    per_part = max(1, -(-count // parts))
    return [(start, min(start + per_part, count)) for start in range(0, count, per_part)]


def _fork_decode(ranges: list[tuple[int, int]], queue: int, report: int, events_dir: Path, worker: int,
                 result: Path) -> int:
    """Fork a worker that decodes the ranges whose indexes it reads from the pipe `queue` (one byte
    each) until the pipe is empty, writing each index to the pipe `report` once it is done, and
    pickles its [(index, DecodedTrace)] (or its exception) to `result`; returns the worker's pid."""
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        die_with_parent(parent)
        try:
            done: list[tuple[int, DecodedTrace]] = []
            while taken := os.read(queue, 1):
                first, stop = ranges[taken[0]]
                done.append((taken[0], _decode_range(first, stop, events_dir, taken[0])))
                os.write(report, taken)  # one byte per range done: the parent's progress
            outcome: object = done
            status = 0
        except Exception as error:  # noqa: BLE001 - handed to the parent, which raises it
            outcome = error
        try:
            with result.open("wb") as handle:
                pickle.dump(outcome, handle, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as error:  # no result can be written (a full disk): the exit status says why
            status = error.errno if error.errno and 0 < error.errno < RESULT_UNWRITTEN_STATUS_LIMIT else 1
    finally:
        os._exit(status)  # no atexit handlers or buffered output of the parent run twice


def _collect(pid: int, result: Path, worker: int) -> list[tuple[int, DecodedTrace]]:
    _, status = os.waitpid(pid, 0)
    try:
        with result.open("rb") as handle:
            outcome = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        code = os.waitstatus_to_exitcode(status)
        if code > 1:  # the errno of the failed result write
            raise OSError(code, os.strerror(code), str(result)) from None
        raise RuntimeError(f"decode worker {worker} ended without a result (wait status {status})") from None
    finally:
        result.unlink(missing_ok=True)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def _report_progress(report: int, ranges: list[tuple[int, int]], on_progress: Callable[[float], None]) -> None:
    """Call `on_progress(share of events decoded)` as workers report ranges done, until every
    worker has closed the pipe (ended)."""
    total = max(1, ranges[-1][1])
    decoded = 0
    while done := os.read(report, len(ranges)):
        decoded += sum(ranges[index][1] - ranges[index][0] for index in done)
        on_progress(decoded / total)


def decode_to_parquet(raw_events: Sequence[msgspec.Raw], events_dir: Path, workers: int,
                      while_workers_run: Callable[[], None] | None = None,
                      on_progress: Callable[[float], None] | None = None) -> DecodedTrace:
    """Decode all events, writing the `events` table under `events_dir`. `while_workers_run` is
    called once the workers are forked (only then, so they do not inherit what it sets up);
    `on_progress` hears the share of events decoded as workers finish ranges. A trace with B/E
    duration events is decoded a second time once its pairs are known (they can span ranges)."""
    decoded = _decode_all(raw_events, events_dir, workers, while_workers_run, on_progress, None)
    if decoded.begin_end.num_rows == 0:
        return decoded
    pairs = pair_begin_end(decoded.begin_end)
    if len(pairs.begin_idx):
        for part in events_dir.glob("*.parquet"):
            part.unlink()
        decoded = _decode_all(raw_events, events_dir, workers, None, None, pairs)
    decoded.begin_end_paired, decoded.begin_end_unmatched = len(pairs.begin_idx), pairs.unmatched
    return decoded


def _decode_all(raw_events: Sequence[msgspec.Raw], events_dir: Path, workers: int,
                while_workers_run: Callable[[], None] | None, on_progress: Callable[[float], None] | None,
                pairs: BeginEndPairs | None) -> DecodedTrace:
    usable_workers = min(workers, max(1, len(raw_events) // MIN_EVENTS_PER_WORKER))
    if multiprocessing.current_process().daemon:  # already a pool worker: no children allowed
        usable_workers = 1
    global _inherited_events, _inherited_window, _inherited_pairs
    _inherited_events, _inherited_pairs = raw_events, pairs
    _inherited_window = trace_window(window_sample(raw_events))  # from all events, before they are split up
    try:
        if usable_workers == 1:
            return _decode_range(0, len(raw_events), events_dir, 0)
        ranges = _ranges(len(raw_events), min(usable_workers * RANGES_PER_WORKER, _MAX_RANGES))
        # Every range is decoded in a forked worker, this process only waits: the millions of
        # short-lived objects of a decode then never fragment its heap, which holds the warehouse
        # update and the analysis next (55 MB trace: -17 MB peak RSS; bench/analyze.py).
        results = [events_dir.parent / f".decoded-{worker}.pickle" for worker in range(usable_workers)]
        queue, feed = os.pipe()
        try:
            os.write(feed, bytes(range(len(ranges))))  # a few bytes: never blocks on the pipe buffer
        finally:
            os.close(feed)  # before forking: a worker sees the end of the pipe once it is empty
        report_read, report_write = os.pipe()
        try:
            try:
                pids = [_fork_decode(ranges, queue, report_write, events_dir, worker, results[worker])
                        for worker in range(usable_workers)]
            finally:
                os.close(queue)
                os.close(report_write)  # the pipe ends once every worker has ended
            if while_workers_run is not None:
                while_workers_run()
            if on_progress is not None:
                _report_progress(report_read, ranges, on_progress)
        finally:
            os.close(report_read)
        parts: list[tuple[int, DecodedTrace]] = []
        errors: list[BaseException] = []
        for worker, (pid, result) in enumerate(zip(pids, results)):
            try:  # every worker is waited for, even after one failed
                parts += _collect(pid, result, worker)
            except Exception as error:  # noqa: BLE001 - the first one is raised below
                errors.append(error)
        if errors:
            raise errors[0]
        return merge_decoded([decoded for _, decoded in sorted(parts, key=lambda part: part[0])])
    finally:
        _inherited_events, _inherited_window, _inherited_pairs = [], None, None
