"""`tracelake ingest`: find trace files, stage them in parallel, commit them, update the marts."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from tracelake import __version__
from tracelake.core.errors import BadTraceError, NotATraceError, TraceLakeError
from tracelake.crashpoints import crash_point
from tracelake.folders import MARKER_NAME
from tracelake.graph_captures import REPLAY_TAG, CaptureFile, folder_capture_links
from tracelake.ingest.prefetch import take_prefetched
from tracelake.ingest.process_lifetime import die_with_parent
from tracelake.ingest.reader import PreRead, file_sha256, is_trace_file, read_and_hash
from tracelake.ingest.staged import StagedTrace
from tracelake.ingest.trace_ingest import stage_trace, trace_id_from_sha256
from tracelake.lake_catalog import LAKE_FILE
from tracelake.memory import release_free_memory
from tracelake.warehouse import DATABASE_FILE, PreparedUpdate, Warehouse

# Files a process needs open besides the staging locks: Python, DuckDB, pyarrow, the pool's pipes.
OPEN_FILE_HEADROOM = 256
# The files whose presence marks a folder TraceLake wrote (tracelake/folders.py, tracelake/lake_catalog.py,
# tracelake/warehouse.py): ingesting a folder does not descend into one
TRACELAKE_FOLDER_MARKERS = (MARKER_NAME, LAKE_FILE, DATABASE_FILE)


@dataclass
class TraceOutcome:
    path: Path
    trace_id: str | None
    status: str  # "new" | "known" | "failed" | "skipped"
    event_count: int = 0
    seconds: float = 0.0
    message: str = ""


class IngestProgress(Protocol):
    """What ingest tells a progress display: the work to do, each trace done, each stage."""

    def started(self, total_bytes: int) -> None: ...

    def finished(self, outcome: TraceOutcome, size_bytes: int) -> None: ...

    def stage(self, description: str) -> None: ...

    def decoding(self, path: Path, share: float) -> None:
        """`share` of the events of `path` (staged in this process) are decoded."""


class NoProgress:
    def started(self, total_bytes: int) -> None:
        pass

    def finished(self, outcome: TraceOutcome, size_bytes: int) -> None:
        pass

    def stage(self, description: str) -> None:
        pass

    def decoding(self, path: Path, share: float) -> None:
        pass


@dataclass
class IngestReport:
    outcomes: list[TraceOutcome] = field(default_factory=list)
    model_update: str = "none"
    seconds: float = 0.0

    @property
    def failed(self) -> list[TraceOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def new_trace_ids(self) -> list[str]:
        return [o.trace_id for o in self.outcomes if o.status == "new" and o.trace_id]


@dataclass(frozen=True)
class StagingWork:
    """One trace to stage: its file, its hash, and the staging folder it is written into."""

    path: Path
    sha256: str
    folder: Path


class StagingEngine(Protocol):
    """Stages traces elsewhere than in this machine's forked workers (tracelake/ray_engine.py)."""

    def check_visible(self, warehouse: Warehouse, traces: list[Path]) -> None:
        """Raise a TraceLakeError, before anything is written, when the engine cannot reach the
        warehouse folder or the traces."""

    def stage_all(self, work: dict[str, StagingWork], tags_of: dict[str, dict[str, str]],
                  record: Callable[[str, StagedTrace | None, BaseException | None], None]) -> None:
        """Stage every trace of `work`, calling `record` (trace id, staged or None, error or None) as each ends."""


@dataclass(frozen=True)
class _Candidate:
    path: Path
    from_folder: bool
    sha256: str = ""
    pre_read: PreRead | None = None


def written_by_tracelake(folder: Path) -> bool:
    """A folder TraceLake wrote: an output folder (its marker file) or a warehouse (its layout file, or
    the classic layout's database). Its JSON files are reports, dbt artifacts or catalogs, never traces."""
    return any((folder / name).is_file() for name in TRACELAKE_FOLDER_MARKERS)


def trace_files_in(folder: Path) -> list[Path]:
    """The .json / .json.gz files under `folder`, recursively, in path order; the folders TraceLake
    wrote (reports, dashboards, warehouses) are not searched."""
    found: list[Path] = []
    for current, subfolders, files in os.walk(folder):
        here = Path(current)
        if here != folder and written_by_tracelake(here):
            subfolders.clear()
            continue
        found.extend(here / name for name in files if is_trace_file(here / name))
    return sorted(found)


def find_trace_files(paths: list[Path]) -> list[_Candidate]:
    """Files as given; folders searched recursively for .json / .json.gz."""
    found: list[_Candidate] = []
    for path in paths:
        if not path.exists():
            raise BadTraceError(f"{path}: no such file or folder; check the path")
        if path.is_dir():
            files = trace_files_in(path)
            if not files:
                raise BadTraceError(f"{path}: folder holds no .json or .json.gz trace files")
            found.extend(_Candidate(p, True) for p in files)
        else:
            found.append(_Candidate(path, False))
    return found


def stage_into(path: Path, sha256: str, staging_dir: Path, tags: dict[str, str], workers: int = 1,
           pre_read: PreRead | None = None, while_decoding: Callable[[], None] | None = None,
           on_progress: Callable[[float], None] | None = None) -> StagedTrace:
    """Decode the trace at `path` into `staging_dir` (the caller's folder); on a failure the
    folder is left empty."""
    try:
        return stage_trace(path, sha256, staging_dir, tags, __version__, workers, pre_read, while_decoding,
                           on_progress)
    except BaseException:
        for table in list(staging_dir.iterdir()) if staging_dir.is_dir() else []:
            shutil.rmtree(table, ignore_errors=True)  # the folder itself is its owner's to remove
        raise


class _WarehouseOpener:
    """Takes the write lock and opens the warehouse for the model update: in a thread started
    while forked workers decode a trace (`start`), else when first asked (`prepared`). The lock is
    held from then until `close`, after the update (55 MB trace: ~0.05 s of opening and of DuckDB
    setting up its Parquet reader leave the critical path)."""

    def __init__(self, warehouse: Warehouse) -> None:
        self._warehouse = warehouse
        self._lock = ExitStack()
        self._thread: ThreadPoolExecutor | None = None
        self._opening: Future[PreparedUpdate] | None = None
        self._prepared: PreparedUpdate | None = None

    def start(self) -> None:
        if self._opening is None and self._prepared is None:
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warehouse-open")
            self._opening = self._thread.submit(self._open, True)

    def _open(self, warm_up: bool) -> PreparedUpdate:
        self._lock.enter_context(self._warehouse.write_lock())
        return self._warehouse.prepare_update(warm_up)

    def prepared(self) -> PreparedUpdate:
        if self._prepared is None:
            self._prepared = self._opening.result() if self._opening is not None else self._open(False)
        return self._prepared

    def close(self) -> None:
        try:
            if self._thread is not None:
                if self._prepared is None:  # the update never came (an error, a stop): stop waiting for the lock
                    self._warehouse.stop_waiting.set()
                self._thread.shutdown(wait=True)
                self._warehouse.stop_waiting.clear()
                if self._prepared is None and self._opening is not None and self._opening.exception() is None:
                    self._prepared = self._opening.result()
            if self._prepared is not None:
                self._prepared.close()
        finally:
            self._lock.close()


def _unique_candidates(candidates: list[_Candidate]) -> list[_Candidate]:
    seen: set[Path] = set()
    unique = []
    for candidate in candidates:
        key = candidate.path.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(candidate)
    return unique


def _capture_tags(links: dict[Path, list[CaptureFile]], ids: dict[Path, str]) -> dict[Path, dict[str, str]]:
    """The tags that record each replay trace's capture traces, and each capture's batch size and mode."""
    path_tags: dict[Path, dict[str, str]] = {}
    for replay, captures in links.items():
        path_tags.setdefault(replay.resolve(), {})[REPLAY_TAG] = ",".join(sorted({ids[c.path.resolve()] for c in captures}))
        for capture in captures:
            path_tags.setdefault(capture.path.resolve(), {}).update(capture.tags())
    return path_tags


def ingest_paths(
    paths: list[Path],
    warehouse: Warehouse,
    tags: dict[str, str],
    jobs: int,
    progress: IngestProgress | None = None,
    captures: dict[Path, list[CaptureFile]] | None = None,
    engine: StagingEngine | None = None,
) -> IngestReport:
    """Ingest `paths` (files, or folders searched for traces). `captures` names the capture traces
    of a GPU-graph replay trace (`--capture-folder`); a folder ingest links the traces of a
    `capture_traces/` folder to the traces beside it on its own. Those links are stored as tags
    (tracelake/graph_captures.py), and a replay trace whose links change is re-modelled with them.
    `engine` stages the traces instead of forked workers of this process (`--engine ray`)."""
    started = time.perf_counter()
    # The system allocator hands freed decode buffers back to the OS; pyarrow's default
    # (mimalloc) keeps them, which measured +60 MB peak RSS on a 55 MB trace (bench/analyze.py).
    pa.set_memory_pool(pa.system_memory_pool())
    progress = progress or NoProgress()
    captures = captures or {}
    capture_paths = [c.path for linked in captures.values() for c in linked]
    candidates = _unique_candidates(find_trace_files(paths) + [_Candidate(p, False) for p in capture_paths])
    links = {**folder_capture_links([c.path for c in candidates if c.from_folder]), **captures}
    if engine is not None:
        engine.check_visible(warehouse, [c.path for c in candidates])
    warehouse.prepare_for_writing()
    progress.started(sum(c.path.stat().st_size for c in candidates))
    report = IngestReport()
    known = warehouse.trace_ids()
    pending: dict[str, _Candidate] = {}
    ids: dict[Path, str] = {}
    for candidate in candidates:
        prefetched = take_prefetched(candidate.path)
        if len(candidates) == 1:  # read once: the bytes are hashed here and parsed when staged
            data, sha256 = prefetched or read_and_hash(candidate.path)
            pre_read: PreRead | None = PreRead(data)
            del data
        else:
            pre_read, sha256 = None, prefetched[1] if prefetched else file_sha256(candidate.path)
        del prefetched
        trace_id = trace_id_from_sha256(sha256)
        ids[candidate.path.resolve()] = trace_id  # resolved: a capture may be named by another spelling
        if trace_id in known or trace_id in pending:
            outcome = TraceOutcome(candidate.path, trace_id, "known", message="already ingested")
            report.outcomes.append(outcome)
            progress.finished(outcome, candidate.path.stat().st_size)
            continue
        pending[trace_id] = _Candidate(candidate.path, candidate.from_folder, sha256, pre_read)

    path_tags = _capture_tags(links, ids)
    tags_of = {trace_id: {**tags, **path_tags.get(c.path.resolve(), {})} for trace_id, c in pending.items()}
    # the replays' capture traces join every model update of the replay: the update reads only its
    # traces' partitions
    linked = {ids[replay.resolve()]: {ids[c.path.resolve()] for c in caps} for replay, caps in links.items()}
    replays_of = {capture: {r for r, caps in linked.items() if capture in caps} for caps in linked.values() for capture in caps}
    remodel: set[str] = set()
    retagged = [o for o in report.outcomes if o.status == "known" and o.trace_id in known]
    with warehouse.write_lock() if retagged and (tags or path_tags) else ExitStack():
        for outcome in retagged:
            wanted = {**tags, **path_tags.get(outcome.path.resolve(), {})}
            if wanted and warehouse.retag(outcome.trace_id or "", wanted):
                outcome.message = "already ingested; tags updated"
                if REPLAY_TAG in wanted:
                    remodel.add(outcome.trace_id or "")
                # a capture's new batch size or mode changes which capture its replays map to
                remodel |= replays_of.get(outcome.trace_id or "", set())
    interrupted: set[str] = set()
    opener = _WarehouseOpener(warehouse)
    try:
        staged = _stage_all(pending, warehouse, tags_of, jobs, report, progress, opener.start, engine)
        crash_point("staged")
        release_free_memory()
        if staged or remodel:
            progress.stage("updating the warehouse tables")
            prepared = opener.prepared()  # the write lock is held from here on
            warehouse.remove_orphans()
            committed = [s for s in staged if warehouse.commit(s)]
            remodel |= _committed_meanwhile(warehouse, {s.trace_id for s in staged} - {s.trace_id for s in committed},
                                            report, tags_of, replays_of)
            update = {s.trace_id for s in committed} | remodel
            update |= {capture for replay in update for capture in linked.get(replay, set())}
            try:  # also finishes any trace a dead run left committed but not modelled
                report.model_update = warehouse.update_models(sorted(update), prepared)
            except BaseException:
                _uncommit(warehouse, committed)
                raise
        elif warehouse.needs_repair():  # nothing new: still, what a dead run left is finished
            interrupted = set(warehouse.repair_if_idle() or [])
    finally:
        opener.close()
        warehouse.release_staging_dirs()
    for outcome in report.outcomes:
        if outcome.status == "known" and outcome.trace_id in interrupted:
            outcome.message = "already ingested; its interrupted model update is finished now"
    report.seconds = time.perf_counter() - started
    return report


def _committed_meanwhile(warehouse: Warehouse, raced: set[str], report: IngestReport,
                         tags_of: dict[str, dict[str, str]], replays_of: dict[str, set[str]]) -> set[str]:
    """Traces another ingest committed while this one decoded them (seen once this one holds the
    lock): reported as a re-ingest reports them, their tags merged the same way, never as new.
    Returns the traces to re-model for a changed link tag."""
    remodel: set[str] = set()
    for outcome in report.outcomes:
        if outcome.status != "new" or outcome.trace_id not in raced:
            continue
        outcome.status, outcome.message = "known", "already ingested"
        wanted = tags_of.get(outcome.trace_id, {})
        if wanted and warehouse.retag(outcome.trace_id, wanted):
            outcome.message = "already ingested; tags updated"
            if REPLAY_TAG in wanted:
                remodel.add(outcome.trace_id)
            remodel |= replays_of.get(outcome.trace_id, set())
    return remodel


def _stage_all(
    pending: dict[str, _Candidate],
    warehouse: Warehouse,
    tags_of: dict[str, dict[str, str]],
    jobs: int,
    report: IngestReport,
    progress: IngestProgress,
    while_decoding: Callable[[], None],
    engine: StagingEngine | None = None,
) -> list[StagedTrace]:
    staged: list[StagedTrace] = []
    if not pending:
        return staged

    def record(trace_id: str, result: StagedTrace | None, error: BaseException | None) -> None:
        candidate = pending[trace_id]
        if result is not None:
            staged.append(result)
            outcome = TraceOutcome(candidate.path, trace_id, "new", result.event_count, result.seconds)
        elif isinstance(error, NotATraceError) and candidate.from_folder:
            outcome = TraceOutcome(candidate.path, None, "skipped", message="not a profiler trace")
        else:
            outcome = TraceOutcome(candidate.path, trace_id, "failed", message=str(error))
        report.outcomes.append(outcome)
        progress.finished(outcome, candidate.path.stat().st_size)

    _allow_open_files(len(pending))
    try:
        work = {tid: (c.path, c.sha256, warehouse.new_staging_dir(tid)) for tid, c in pending.items()}
    except OSError as exc:
        if exc.errno != errno.EMFILE:
            raise
        raise BadTraceError(f"{len(pending)} traces at once exceed this process's open-file limit (each holds a "
                            "locked staging folder); ingest them in smaller batches or raise `ulimit -n`") from None
    if engine is not None:
        while_decoding()  # the warehouse is opened for the update while the cluster stages
        engine.stage_all({tid: StagingWork(*item) for tid, item in work.items()}, tags_of, record)
        return staged
    if jobs <= 1 or len(work) == 1:  # one file: its events are decoded on `jobs` cores
        for trace_id, (path, sha, folder) in work.items():
            try:
                staged_trace = stage_into(path, sha, folder, tags_of[trace_id], jobs, pending[trace_id].pre_read,
                                      while_decoding, partial(progress.decoding, path))
                record(trace_id, staged_trace, None)
            except TraceLakeError as exc:
                record(trace_id, None, exc)
        return staged
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(work)), mp_context=get_context("fork"),
                               initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        futures = {pool.submit(stage_into, path, sha, folder, tags_of[tid]): tid for tid, (path, sha, folder) in work.items()}
        for future in as_completed(futures):
            trace_id = futures[future]
            error = future.exception()
            if error is not None and not isinstance(error, TraceLakeError):
                raise error
            record(trace_id, future.result() if error is None else None, error)
    except BaseException:
        # a stop or a crash: the queued traces are not decoded, the running workers are ended
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return staged


def _allow_open_files(count: int) -> None:
    """Each trace being staged holds the lock file of its staging folder open: raise the soft limit
    on open files toward the hard one when a batch needs more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + OPEN_FILE_HEADROOM
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def _uncommit(warehouse: Warehouse, committed: list[StagedTrace]) -> None:
    """Take committed partitions back out when the model update failed, but not those of traces
    the published warehouse already lists (the failure came after the publish)."""
    modelled = warehouse.modelled_trace_ids()
    for staged in committed:
        if staged.trace_id in modelled:
            continue
        commit_partition = warehouse.parquet_dir / "trace_files" / f"trace_id={staged.trace_id}"
        shutil.rmtree(commit_partition, ignore_errors=True)
    warehouse.remove_orphans()
