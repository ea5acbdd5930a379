"""TraceLake from Python (a notebook, a script): open a warehouse, query it into polars, ingest and
analyze traces. The same warehouse the `tracelake` command writes, with the same rules: a reader
keeps the snapshot it opened and never blocks a writer; `ingest` and `analyze` take the writers'
lock like the command does.

    import tracelake
    wh = tracelake.open()                                  # $TRACELAKE_WAREHOUSE or the default
    wh.ingest(["runs/nightly-42/"], tags={"run": "nightly-42"})   # tracelake.open(path, create=True) for a new one
    wh.traces()                                            # polars DataFrame
    wh.sql("select * from gpu_timeline where idle_time_percent > $p", {"p": 20}).pl()
    wh.table("kernels", trace="model=bert,run=nightly-42")
    wh.jobs()                                              # one row per multi-rank job (docs/jobs.md)
    job = wh.job("dlrm_8rank")
    job.ranks(), job.collectives(), job.instances(), job.stragglers(), job.signatures(), job.spread()
    wh.queue_length("rank0.json.gz").plot()                # HTA's analyses per trace (docs/hta_parity.md)
    result = wh.analyze("trace.json.gz", out="report/")    # or tracelake.analyze(..., warehouse=...)
    result.findings[0].title
    job = wh.analyze("runs/job42/", gpus_per_node=8)        # a folder (or a list of files): one job
    job.rank_reports[7], job.missing_ranks
    d = tracelake.diff("run=nightly-41", "run=nightly-42")   # or wh.diff(...): the op and kernel diff `compare` judges
    d.ops, d.kernels, d.counts(), d.plot()                 # frames (added / removed / changed / unchanged), bars
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from tracelake.analyzers.contracts import RankedFinding
from tracelake.analyzers.trace_diff import OpKernelDiff
from tracelake.config import default_jobs, default_warehouse
from tracelake.core.errors import TraceLakeError, WarehouseError
from tracelake.trace_frames import (
    ANNOTATIONS,
    IDLE_BREAKDOWN,
    LAUNCH_STATS,
    MEMORY_BANDWIDTH,
    MEMORY_BANDWIDTH_SUMMARY,
    QUEUE_LENGTH,
    QUEUE_SUMMARY,
    SEQUENCES,
    TraceFrame,
    read_mart,
)

if TYPE_CHECKING:
    import duckdb
    import polars
    from matplotlib.figure import Figure

    from tracelake.analyze_options import AnalyzeOptions
    from tracelake.warehouse import Warehouse

PathLike = str | os.PathLike[str]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_JOBS_LISTED = 10  # job names listed when a name matches none
TRACES_COLUMNS = ("trace_id, file_name, source_path, device_name, platform, runtime, event_count, gpu_event_count, "
                  "cpu_op_count, quality_verdict, tags, ingested_at")


class IngestedTrace(BaseModel):
    """One file of an `ingest` call: new, already in the warehouse, skipped (not a trace) or failed."""

    model_config = ConfigDict(frozen=True)

    path: Path
    trace_id: str | None
    status: str  # new | known | skipped | failed
    event_count: int
    message: str


class IngestResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    traces: list[IngestedTrace]
    model_update: str  # fast | compiled | dbt | none: how the warehouse tables were brought up to date
    seconds: float

    @property
    def trace_ids(self) -> list[str]:
        """The ids of the files that are in the warehouse now (new or already there)."""
        return [t.trace_id for t in self.traces if t.trace_id and t.status in ("new", "known")]

    @property
    def failed(self) -> list[IngestedTrace]:
        return [t for t in self.traces if t.status == "failed"]

    notes: list[str] = []  # the jobs recognized and tagged (`job X: 8 of 8 ranks ...`), and why a folder is none


class Analysis(BaseModel):
    """What `analyze` wrote: the report folder and its ranked findings (priority_data.json)."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    platform: str
    platform_source: str  # flag (--platform) | tag | trace device | assumed (no known device named)
    trace2_id: str | None
    platform2: str | None
    out_dir: Path
    analysis_md: Path
    e2e_time_ms: float
    findings: list[RankedFinding]  # ranked: findings[0] is P1
    warnings: list[str]

    def markdown(self) -> str:
        return self.analysis_md.read_text()


class TraceDiff(OpKernelDiff):
    """HTA's TraceDiff for two traces (or two sets of traces, each side the mean per trace): `ops`
    one row per op signature, `kernels` one per kernel name, each with status added / removed /
    changed / unchanged, count and ms on each side and their deltas; the rows `tracelake compare`
    judges (analyzers/trace_diff.py)."""

    def plot(self, what: str = "ops", top: int = 15) -> Figure:
        """Bars of the `top` largest time changes of `ops` or `kernels` (a matplotlib Figure)."""
        from tracelake.reports.diff_plot import plot_top_changes  # noqa: PLC0415 - matplotlib only when asked

        if what not in ("ops", "kernels"):
            raise TraceLakeError(f"plot shows 'ops' or 'kernels', not {what!r}")
        frame = self.ops if what == "ops" else self.kernels
        sides = f"{', '.join(self.baseline_ids)} -> {', '.join(self.candidate_ids)}"
        return plot_top_changes(frame, f"Top {what} changes: {sides}", top)


class JobAnalysis(BaseModel):
    """What `analyze` wrote for a job: each rank's report and the job's (docs/jobs.md, "Outputs")."""

    model_config = ConfigDict(frozen=True)

    job: str  # the `job` tag of its traces: `wh.sql("select * from job_ranks where job_id = $j", {"j": job.job})`
    world_size: int
    ranks: list[int]  # the ranks present, ascending
    missing_ranks: list[int]
    node_count: int
    out_dir: Path
    analysis_md: Path | None  # the job's report, once the job report step writes one
    rank_reports: dict[int, Path]  # rank -> its analysis.md (ranks/rank<r>/analysis.md)
    warnings: list[str]


class WarehouseHandle:
    """A read-only view of a warehouse. Each query reads the newest published snapshot: when a
    writer (the CLI, `ingest`, `analyze`) published a new one since the last query, the handle
    reconnects. Within one process DuckDB hands every connection to a file path the database it
    has open, so reconnecting closes the handle's earlier connections first: relations made before
    a newer snapshot are closed with them (query again). `ingest` and `analyze` release every open
    handle's connection before they write, for the same reason."""

    def __init__(self, root: Path, create: bool = False) -> None:
        from tracelake.lakehouse import open_warehouse  # noqa: PLC0415

        self.warehouse = open_warehouse(root)
        if not create:
            self.warehouse.require_existing()
        self._connections: list[duckdb.DuckDBPyConnection] = []
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._snapshot: tuple[int, int] | None = None
        _open_handles.add(self)

    @property
    def path(self) -> Path:
        return self.warehouse.root

    def __repr__(self) -> str:
        return f"tracelake.open({str(self.path)!r})"

    def __enter__(self) -> WarehouseHandle:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for con in self._cursors + self._connections:
            con.close()
        self._cursors.clear()
        self._connections.clear()
        self._snapshot = None

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The read-only DuckDB connection to the current snapshot (locked down like `tracelake sql`)."""
        status = self.warehouse.db_path.stat()
        snapshot = (status.st_ino, status.st_mtime_ns)
        if not self._connections or snapshot != self._snapshot:
            self.close()
            self._connections.append(self.warehouse.connect_read_only())
            self._snapshot = snapshot
        return self._connections[-1]

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """A DuckDB relation over the warehouse: `.pl()`, `.df()`, `.arrow()`, `.fetchall()`.
        Only reading statements run (the rules of `tracelake sql`)."""
        from tracelake.sql_guard import check_query  # noqa: PLC0415

        con = self.connection()
        check_query(con.cursor(), query)
        cursor = con.cursor()  # its own result: relations of earlier calls stay readable
        self._cursors.append(cursor)
        return cursor.sql(query, params=params)

    def table(self, name: str, trace: str | Iterable[str] | None = None) -> polars.DataFrame:
        """A public table or view as a polars DataFrame, all of it or the rows of `trace`: a trace
        id (or a prefix of >= 6 hex digits), a trace file already ingested, a KEY=VALUE[,KEY=VALUE]
        tag selector, or several of those."""
        if not _NAME.match(name) or name not in self.tables():
            raise WarehouseError(f"no public table {name!r}; wh.tables() lists them")
        if trace is None:
            return self.sql(f'select * from "{name}"').pl()
        trace_ids = self.trace_ids(trace)
        return self.sql(f'select * from "{name}" where trace_id in (select unnest($ids))', {"ids": trace_ids}).pl()

    def tables(self) -> list[str]:
        """The public tables and views (the main schema)."""
        rows = self.connection().cursor().execute(
            "select table_name from duckdb_tables() where schema_name = 'main' union "
            "select view_name from duckdb_views() where schema_name = 'main' and not internal order by 1").fetchall()
        return [row[0] for row in rows]

    def traces(self) -> polars.DataFrame:
        """One row per trace whose tables are up to date, oldest first."""
        return self.sql(f"select {TRACES_COLUMNS} from traces order by ingested_at, trace_id").pl()

    def jobs(self) -> polars.DataFrame:
        """One row per multi-rank job (the `jobs` mart: world size, ranks present, missing ranks,
        nodes, clock method), by name."""
        self._require_job_marts()
        return self.sql("select * from jobs order by job_id").pl()

    def job(self, name: str) -> JobHandle:
        """One job's frames (`job.ranks()`, `.collectives()`, ...); a job the warehouse does not hold
        is an error naming the jobs it does."""
        self._require_job_marts()
        names = [row[0] for row in self.sql("select job_id from jobs order by job_id").fetchall()]
        if name not in names:
            held = ", ".join(names[:MAX_JOBS_LISTED]) + (", ..." if len(names) > MAX_JOBS_LISTED else "")
            raise WarehouseError(f"no job {name!r} in {self.path}" + (f"; its jobs: {held}" if names else
                                 "; it holds no job (ingest a folder of rank traces, or pass --job NAME)"))
        return JobHandle(self, name)

    # HTA's analyses, one trace each (docs/hta_parity.md): a TraceFrame (.frame, .sql, .plot())
    def queue_length(self, trace: str) -> TraceFrame:
        """The launch queue of each stream over time (`stream_queue_lengths`); `.plot()` steps."""
        return read_mart(self, trace, "stream_queue_lengths", "device, stream, ts_us, queue_length desc", QUEUE_LENGTH)

    def queue_summary(self, trace: str) -> TraceFrame:
        """Per stream, queue length statistics and time blocked on a full queue (`stream_queue_summary`)."""
        return read_mart(self, trace, "stream_queue_summary", "device, stream", QUEUE_SUMMARY)

    def memory_bandwidth(self, trace: str) -> TraceFrame:
        """Memory-copy bandwidth over time per copy kind (`memcpy_bandwidth_series`); `.plot()` steps."""
        return read_mart(self, trace, "memcpy_bandwidth_series", "device, copy_kind, ts_us, bandwidth_change",
                         MEMORY_BANDWIDTH)

    def memory_bandwidth_summary(self, trace: str) -> TraceFrame:
        """Per copy kind, bandwidth statistics (`memcpy_bandwidth_summary`)."""
        return read_mart(self, trace, "memcpy_bandwidth_summary", "device, copy_kind", MEMORY_BANDWIDTH_SUMMARY)

    def launch_stats(self, trace: str) -> TraceFrame:
        """Per GPU op, its launch call's CPU duration, GPU duration and launch delay (`kernel_launch_stats`)."""
        return read_mart(self, trace, "kernel_launch_stats", "launch_ts_us, event_idx", LAUNCH_STATS)

    def idle_breakdown(self, trace: str) -> TraceFrame:
        """Idle time per stream: host wait, kernel wait, other (`stream_idle_breakdown`)."""
        return read_mart(self, trace, "stream_idle_breakdown", "device, stream, idle_category", IDLE_BREAKDOWN)

    def annotation_breakdown(self, trace: str) -> TraceFrame:
        """GPU time per GPU user annotation, longest first (`gpu_annotation_breakdown`)."""
        return read_mart(self, trace, "gpu_annotation_breakdown", "total_us desc, name", ANNOTATIONS)

    def kernel_sequences(self, trace: str) -> TraceFrame:
        """Frequent sequences of consecutive kernels on a stream, most GPU time first (`kernel_sequences`)."""
        return read_mart(self, trace, "kernel_sequences", "total_gpu_time_us desc, sequence", SEQUENCES)

    def _require_job_marts(self) -> None:
        if "jobs" not in self.tables():
            raise WarehouseError(f"warehouse {self.path} has no jobs model yet; run `tracelake build --warehouse "
                                 f"{self.path}` to bring it up to date")

    def ingest(self, paths: PathLike | Iterable[PathLike], tags: dict[str, str] | None = None,
               jobs: int | None = None, job: str | None = None, gpus_per_node: int | None = None,
               engine: str = "local", ray_address: str | None = None) -> IngestResult:
        """Ingest trace files or folders into this warehouse (as `tracelake ingest`); `engine="ray"`
        stages each trace as a task of the Ray cluster at `ray_address` (as `--engine ray`)."""
        return ingest(paths, warehouse=self.path, tags=tags, jobs=jobs, job=job, gpus_per_node=gpus_per_node,
                      engine=engine, ray_address=ray_address)

    def analyze(self, trace: PathLike | Sequence[PathLike], out: PathLike | None = None, platform: str | None = None,
                **options: Any) -> Analysis | JobAnalysis:
        """Analyze one trace, or a job (a folder, or several files), in this warehouse (as `tracelake
        analyze`); the options of `tracelake.analyze`."""
        return analyze(trace, out, platform, warehouse=self.path, **options)

    def diff(self, baseline: str | Iterable[str], candidate: str | Iterable[str]) -> TraceDiff:
        """The op and kernel diff of `candidate` against `baseline` (each a selector as `table`
        takes, or several); the same rows `tracelake compare` judges."""
        from tracelake.analyzers.trace_diff import diff_traces  # noqa: PLC0415

        found = diff_traces(self.connection().cursor(), self.trace_ids(baseline), self.trace_ids(candidate))
        return TraceDiff(found.baseline_ids, found.candidate_ids, found.ops, found.kernels)

    def trace_ids(self, trace: str | Iterable[str]) -> list[str]:
        """The trace ids a selector (or several) names; nothing is ingested."""
        from tracelake.selectors import resolve_traces  # noqa: PLC0415

        selectors = [trace] if isinstance(trace, str) else list(trace)
        return list(dict.fromkeys(t for s in selectors for t in resolve_traces(self.warehouse, s, ingest_new=False)))


class JobHandle:
    """One multi-rank job of a warehouse: its marts (docs/jobs.md) as polars DataFrames, each read
    from the handle's current snapshot."""

    def __init__(self, warehouse: WarehouseHandle, name: str) -> None:
        self.warehouse = warehouse
        self.name = name

    def __repr__(self) -> str:
        return f"{self.warehouse!r}.job({self.name!r})"

    def _frame(self, mart: str, order: str) -> polars.DataFrame:
        return self.warehouse.sql(f'select * from "{mart}" where job_id = $job order by {order}', {"job": self.name}).pl()

    def summary(self) -> polars.DataFrame:
        """Its row of `jobs`."""
        return self._frame("jobs", "job_id")

    def ranks(self) -> polars.DataFrame:
        """One row per rank: `job_ranks` (trace, rank and node with their sources, base time) with
        `job_rank_metrics` (step time, communication, wait, kernel time, collectives' share)."""
        return self.warehouse.sql(
            "select r.*, m.* exclude (job_id, rank, trace_id, file_name, node_id) from job_ranks r "
            "left join job_rank_metrics m using (job_id, rank) where r.job_id = $job order by r.rank",
            {"job": self.name}).pl()

    def collectives(self) -> polars.DataFrame:
        """One row per rank and collective kernel (`collective_calls`), on the job clock."""
        return self._frame("collective_calls", "instance_id, rank")

    def instances(self) -> polars.DataFrame:
        """One row per matched collective (`collective_instances`): latency, skews, waits, bandwidth."""
        return self._frame("collective_instances", "first_start_us, instance_id")

    def stragglers(self) -> polars.DataFrame:
        """TraceLens' straggler summary (`job_straggler_summary`): the straggler first (least total wait)."""
        return self._frame("job_straggler_summary", "total_wait_us, rank")

    def signatures(self) -> polars.DataFrame:
        """Per collective signature (`collective_signatures`): count, latency, bus bandwidth, bound."""
        if "collective_signatures" not in self.warehouse.tables():
            raise WarehouseError(f"warehouse {self.warehouse.path} has no collective_signatures model yet; run "
                                 f"`tracelake build --warehouse {self.warehouse.path}`")
        return self._frame("collective_signatures", "collective_name, msg_bytes")

    def spread(self) -> polars.DataFrame:
        """min / median / max over the ranks of step time, communication, wait, kernel time (`job_rank_spread`)."""
        return self._frame("job_rank_spread", "metric")

    def traces(self) -> polars.DataFrame:
        """The ranks' rows of `traces`, by rank."""
        return self.warehouse.sql(
            f"select r.rank, {', '.join('t.' + c.strip() for c in TRACES_COLUMNS.split(','))} "
            "from job_ranks r join traces t using (trace_id) where r.job_id = $job order by r.rank",
            {"job": self.name}).pl()


_open_handles: weakref.WeakSet[WarehouseHandle] = weakref.WeakSet()


def _release_readers() -> None:
    """Close the connections of this process's open handles (they reconnect on their next query):
    otherwise the writer's own reads after it published would get DuckDB's cached, older database."""
    for handle in list(_open_handles):
        handle.close()


def open(warehouse: PathLike | None = None, create: bool = False) -> WarehouseHandle:  # noqa: A001 - reads as intended
    """A handle on a warehouse (default: $TRACELAKE_WAREHOUSE, else the per-user one); `create=True`
    accepts a folder that holds no warehouse yet (its first `ingest` makes it)."""
    return WarehouseHandle(Path(warehouse) if warehouse is not None else default_warehouse(), create)


def diff(baseline: str | Iterable[str], candidate: str | Iterable[str], warehouse: PathLike | None = None) -> TraceDiff:
    """The op and kernel diff of two traces (or sets of traces) of a warehouse, as `WarehouseHandle.diff`."""
    with open(warehouse) as handle:
        return handle.diff(baseline, candidate)


def ingest(paths: PathLike | Iterable[PathLike], warehouse: PathLike | None = None,
           tags: dict[str, str] | None = None, jobs: int | None = None, job: str | None = None,
           gpus_per_node: int | None = None, engine: str = "local", ray_address: str | None = None) -> IngestResult:
    """Ingest trace files or folders (as `tracelake ingest`); the tables are up to date on return.
    A folder holding the ranks of one job is tagged as that job; with `job`, the traces must be one
    job of that name (else TraceLakeError). `engine="ray"` stages each trace as a task of the Ray
    cluster at `ray_address` (default: a local Ray instance of `jobs` CPUs), as `--engine ray`."""
    from tracelake.ingestion import ingest_paths  # noqa: PLC0415
    from tracelake.jobs import recognize_jobs  # noqa: PLC0415
    from tracelake.lakehouse import open_warehouse  # noqa: PLC0415
    from tracelake.ray_engine import staging_engine  # noqa: PLC0415

    items = [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else list(paths))]
    _release_readers()
    wh = open_warehouse(Path(warehouse) if warehouse else default_warehouse())
    with staging_engine(engine, ray_address, jobs or default_jobs()) as cluster:
        report = ingest_paths(items, wh, dict(tags or {}), jobs or default_jobs(), engine=cluster)
    notes = [] if report.failed else recognize_jobs(items, report, wh, job, gpus_per_node)
    return IngestResult(
        traces=[IngestedTrace(path=o.path, trace_id=o.trace_id, status=o.status, event_count=o.event_count,
                              message=o.message) for o in report.outcomes],
        model_update=report.model_update, seconds=report.seconds, notes=notes)


def analyze(trace: PathLike | Sequence[PathLike], out: PathLike | None = None, platform: str | None = None, *,
            warehouse: PathLike | None = None, compare: PathLike | None = None, platform2: str | None = None,
            mode: str = "auto", capture_folder: PathLike | None = None, jobs: int | None = None,
            xlsx: bool = False, force: bool = False, job: str | None = None,
            gpus_per_node: int | None = None) -> Analysis | JobAnalysis:
    """Analyze one trace (as `tracelake analyze`): the report folder and the ranked findings. A
    folder, several files or `job` given: the ranks of one job, each rank's report and the job's."""
    from tracelake.analyzers.contracts import PriorityData  # noqa: PLC0415
    from tracelake.lakehouse import open_warehouse  # noqa: PLC0415
    from tracelake.pipeline import AnalyzeOptions, run_analysis  # noqa: PLC0415

    _release_readers()
    paths = [Path(trace)] if isinstance(trace, (str, os.PathLike)) else [Path(p) for p in trace]
    options = AnalyzeOptions(
        platform=platform, mode=mode, out_dir=Path(out) if out is not None else None, jobs=jobs or default_jobs(),
        xlsx=xlsx, capture_folder=Path(capture_folder) if capture_folder else None,
        compare=Path(compare) if compare is not None else None, platform2=platform2, force=force,
        job_name=job, gpus_per_node=gpus_per_node)
    wh = open_warehouse(Path(warehouse) if warehouse else default_warehouse())
    if len(paths) != 1 or paths[0].is_dir() or job is not None:
        return _analyze_job(paths, wh, options)
    if gpus_per_node is not None:
        raise TraceLakeError("gpus_per_node places a job's ranks on nodes; give a folder or several rank files")
    outcome = run_analysis(paths[0], wh, options)
    if outcome.report_problems:
        raise TraceLakeError("the report failed its checks: " + "; ".join(outcome.report_problems))
    priority = PriorityData.model_validate_json((outcome.out_dir / "priority_data.json").read_text())
    return Analysis(
        trace_id=outcome.trace_id, platform=outcome.platform, platform_source=outcome.platform_source,
        trace2_id=outcome.trace2_id, platform2=outcome.platform2, out_dir=outcome.out_dir,
        analysis_md=outcome.analysis_md, e2e_time_ms=priority.e2e_time_ms,
        findings=sorted(priority.findings, key=lambda f: f.global_rank), warnings=outcome.warnings)


def _analyze_job(paths: list[Path], wh: Warehouse, options: AnalyzeOptions) -> JobAnalysis:
    from tracelake.job_pipeline import run_job_analysis  # noqa: PLC0415
    from tracelake.jobs import job_input  # noqa: PLC0415

    outcome = run_job_analysis(job_input(paths, options.job_name), wh, options)
    if outcome.report_problems:
        raise TraceLakeError("the report failed its checks: " + "; ".join(outcome.report_problems))
    job = outcome.job
    return JobAnalysis(
        job=job.name, world_size=job.world_size, ranks=[m.rank for m in job.members], missing_ranks=job.missing_ranks,
        node_count=job.node_count, out_dir=outcome.out_dir, analysis_md=outcome.analysis_md,
        rank_reports={r.rank: outcome.out_dir / r.folder / "analysis.md" for r in outcome.rank_reports},
        warnings=outcome.warnings)
