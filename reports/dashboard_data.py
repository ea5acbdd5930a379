"""What `tracelake dashboard` shows, gathered from the warehouse: DuckDB in, `DashboardData` out.

Runs are grouped by (model, mode, platform, serving phases) and ordered inside a group by the
`run_groups` mart (models/marts/run_groups.sql: the model is the `model` tag, else the trace's file
name; runs in natural order of the `run` tag, untagged runs last, then by ingest time); "consecutive
runs" are neighbours in that order. The chart categories, the run-over-run changes and the training
vs inference sides are marts over it too (`run_group_categories`, `run_category_changes`,
`run_mode_breakdowns`, `run_mode_categories`). Python reads them in order and arranges the rows
into the pydantic models; the reports come from the `analyses` / `findings` tables that
`tracelake analyze` records, when they exist.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
from pydantic import BaseModel

from tracelake.core.errors import WarehouseError
from tracelake.reports.dashboard_jobs import JobRow, gather_jobs

MAX_CHART_CATEGORIES = 8  # the dbt var dashboard_chart_categories: a group's chart shows its 8 largest categories
TOP_REGRESSIONS = 15  # the regression table's length
TOP_MODE_CATEGORIES = 5  # categories listed per side in the training vs inference comparison
REST_CATEGORY = "smaller categories"  # the dbt var dashboard_rest_category: the rest, summed
UNKNOWN = "unknown"
REQUIRED_TABLES = ("runs", "run_groups", "run_group_categories", "run_category_changes", "run_mode_breakdowns",
                   "run_mode_categories", "chart_colours")
TIMELINE_ROLE = "timeline"  # chart_colours.role of the GPU time breakdown's parts
SPARE_ROLE = "spare"  # chart_colours.role of the colours for categories the seed does not list


# ---- the contract ---------------------------------------------------------------------------------

class DashboardRequest(BaseModel):
    warehouse: str
    out_dir: Path  # where index.html will live: links to reports are made relative to it
    generated_at: datetime
    tracelake_version: str


class TimeBreakdown(BaseModel):
    """GPU timeline split (gpu_timeline): the four parts add up to total_time_ms."""

    total_time_ms: float | None = None
    computation_time_ms: float | None = None
    exposed_comm_time_ms: float | None = None
    exposed_memcpy_time_ms: float | None = None
    idle_time_ms: float | None = None
    computation_time_percent: float | None = None
    exposed_comm_time_percent: float | None = None
    exposed_memcpy_time_percent: float | None = None
    idle_time_percent: float | None = None


class ReportLink(BaseModel):
    """One recorded analysis (a row of `analyses`) and how to reach its analysis.md."""

    trace_id: str
    trace2_id: str | None
    trace2_file_name: str | None
    comparison_scope: str | None
    platform: str | None
    platform_source: str | None  # flag | tag | trace device | assumed; None from an analysis before it was kept
    analysis_md: str  # the absolute path analyze recorded
    href: str | None  # from index.html: relative when both share a folder below /, else file://; None if gone
    finding_count: int | None
    top_finding_title: str | None
    top_finding_impact_percent: float | None
    analyzed_at: datetime | None


class TraceRun(BaseModel):
    trace_id: str
    file_name: str
    ingested_at: datetime
    model: str
    model_source: Literal["tag", "job", "file name"]
    run: str | None
    commit: str | None
    mode: str | None
    mode_source: str | None
    platform: str | None
    phase: str | None  # the serving phases its steps ran (decode, prefill+decode, ...); None outside serving
    device_name: str | None
    rank: int | None  # distributed rank (the trace's distributedInfo), None for a single process
    world_size: int | None
    tags: dict[str, str]
    quality_verdict: str | None
    breakdown: TimeBreakdown
    profiler_step_count: int
    median_step_kernel_time_ms: float | None
    group_key: str
    run_index: int  # 1-based position of its run in its group (the ranks of one job share it)
    run_label: str  # the run tag, else the job's folder (ranks), else the ingest time
    trace_label: str  # the trace within its run: `run_label · rank N` for a rank, else run_label
    run_trace_count: int  # traces of its run: the ranks of one job, or traces sharing a run tag
    reports: list[ReportLink]


class CategoryTime(BaseModel):
    op_category: str
    kernel_time_ms: float
    percent: float | None  # of the run's (or the side's) kernel time over all categories


class RunCategories(BaseModel):
    """One run of a group: one trace, or the ranks of one job (means over them, with their spread)."""

    trace_id: str  # its first trace
    file_name: str
    run_label: str
    trace_ids: list[str]
    ranks: list[int]  # the ranks of its traces that have one
    kernel_time_ms: float  # over every category; the mean per trace of a multi-trace run
    kernel_time_min_ms: float  # the spread over its traces (equal to the mean for one trace)
    kernel_time_max_ms: float
    categories: list[CategoryTime]  # the group's chart categories (largest first), then the rest


class RunGroup(BaseModel):
    key: str
    model: str
    mode: str | None
    platform: str | None
    phase: str | None
    categories: list[str]  # chart order; REST_CATEGORY last when the group has more categories
    runs: list[RunCategories]


class CategoryChange(BaseModel):
    """Kernel time of one category from one run of a group to the next."""

    group_key: str
    model: str
    mode: str | None
    platform: str | None
    op_category: str
    before_trace_id: str
    before_file_name: str
    before_run_label: str
    after_trace_id: str
    after_file_name: str
    after_run_label: str
    before_ms: float
    after_ms: float
    change_ms: float
    change_percent: float | None  # None when the category is new in the later run


class ModeSide(BaseModel):
    mode: Literal["training", "inference"]
    trace_ids: list[str]  # in run order
    run_count: int = 0  # run_mode_breakdowns: the ranks of one job are one run
    mean_breakdown: TimeBreakdown  # mean over the side's runs that have a GPU timeline
    top_categories: list[CategoryTime]  # mean kernel time per run; percent of the side's kernel time


class ModeComparison(BaseModel):
    model: str
    platform: str | None
    training: ModeSide
    inference: ModeSide


class DashboardLimits(BaseModel):
    chart_categories: int = MAX_CHART_CATEGORIES
    regressions: int = TOP_REGRESSIONS
    mode_categories: int = TOP_MODE_CATEGORIES


class DashboardData(BaseModel):
    warehouse: str
    generated_at: datetime
    tracelake_version: str
    trace_count: int
    traces: list[TraceRun]  # by group, then run order
    groups: list[RunGroup]
    mode_comparisons: list[ModeComparison]
    regressions: list[CategoryChange]  # largest kernel time increase first
    reports: list[ReportLink]  # newest first
    analyses_recorded: bool  # false when nothing was ever analyzed into this warehouse
    limits: DashboardLimits
    notes: list[str] = []  # what the page chose not to compare, and why (traces sharing a run tag)
    jobs: list[JobRow] = []  # multi-rank jobs (reports/dashboard_jobs.py), by name
    capture_trace_count: int = 0  # graph-capture traces: merged into their replays, not workloads of their own
    timeline_colours: dict[str, str] = {}  # the GPU time breakdown's parts, in stacking order (chart_colours)
    colours: dict[str, str] = {}  # every category on the page -> its colour (chart_colours, then its spares)


# ---- SQL: reads of the run-group marts (models/marts/run_*.sql) ------------------------------------

_RUNS_SQL = "select * from run_groups order by run_position, trace_position"
_CATEGORY_SQL = "select * from run_group_categories order by group_key, run_index, category_rank"
_REGRESSION_SQL = "select * from run_category_changes order by change_ms desc, group_key, op_category limit ?"
_MODE_BREAKDOWN_SQL = "select * from run_mode_breakdowns"
_CAPTURE_COUNT_SQL = "select count(*) from runs anti join run_groups on run_groups.trace_id = runs.trace_id"
_COLOURS_SQL = "select name, role, colour from chart_colours order by role, name"
_MODE_CATEGORY_SQL = ("select * from run_mode_categories where category_rank <= ? "
                      "order by model, group_platform, mode, category_rank")

_REPORTS_SQL = """
with top_findings as (
    {top_findings}
)

select
    a.trace_id, a.trace2_id, t2.file_name as trace2_file_name, a.comparison_scope, a.platform, {platform_source},
    a.analysis_md, a.finding_count, a.analyzed_at,
    f.title as top_finding_title, f.impact_mid_percent as top_finding_impact_percent
from analyses a
join run_groups t on t.trace_id = a.trace_id  -- a report of a graph-capture trace is not a workload's
left join runs t2 on t2.trace_id = a.trace2_id
left join top_findings f on f.trace_id = a.trace_id and f.trace2_id is not distinct from a.trace2_id
order by a.analyzed_at desc nulls last, a.trace_id
"""

_TOP_FINDINGS_SQL = """
    select trace_id, trace2_id, title, impact_mid_percent
    from findings
    qualify row_number() over (partition by trace_id, trace2_id order by global_rank, title) = 1
"""

_NO_FINDINGS_SQL = """
    select null::varchar as trace_id, null::varchar as trace2_id, null::varchar as title,
        null::double as impact_mid_percent
    where false
"""


# ---- helpers --------------------------------------------------------------------------------------

def _rows(db: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    result = db.execute(sql, params or [])
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


def _tables(db: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in db.execute(
        "select table_name from information_schema.tables where table_schema = current_schema()").fetchall()}


def report_href(analysis_md: Path, page_dir: Path) -> str | None:
    """How index.html in page_dir links to analysis_md: a relative path when the two share a folder
    below the filesystem root (the link survives moving that folder), else a file:// URL; None
    when the report is no longer on disk."""
    if not analysis_md.is_file():
        return None
    target, here = analysis_md.resolve(), page_dir.resolve()
    if Path(os.path.commonpath([target, here])) != Path(target.anchor):
        return Path(os.path.relpath(target, here)).as_posix()
    return target.as_uri()


def _rendered(analysis_md: Path) -> Path:
    """The report as a page: analysis.html beside analysis.md when analyze wrote it, else the markdown."""
    page = analysis_md.with_name("analysis.html")
    return page if page.is_file() else analysis_md


def _breakdown(row: dict[str, Any]) -> TimeBreakdown:
    return TimeBreakdown(**{name: row.get(name) for name in TimeBreakdown.model_fields})


def _with_percents(row: dict[str, Any]) -> TimeBreakdown:
    """A breakdown from ms values only (means), the percents computed from the mean total."""
    total = row.get("total_time_ms")
    values = dict(row)
    for part in ("computation", "exposed_comm", "exposed_memcpy", "idle"):
        ms = row.get(f"{part}_time_ms")
        values[f"{part}_time_percent"] = 100 * ms / total if total and ms is not None else None
    return _breakdown(values)


def _by_run(traces: list[TraceRun]) -> dict[tuple[str, int], list[TraceRun]]:
    """The traces of each run of each group, in run order (dicts keep insertion order)."""
    runs: dict[tuple[str, int], list[TraceRun]] = {}
    for trace in traces:
        runs.setdefault((trace.group_key, trace.run_index), []).append(trace)
    return runs


# ---- the gathering --------------------------------------------------------------------------------

def _trace_run(row: dict[str, Any], reports: dict[str, list[ReportLink]]) -> TraceRun:
    return TraceRun(
        trace_id=row["trace_id"], file_name=row["file_name"], ingested_at=row["ingested_at"],
        model=row["model"], model_source=row["model_source"], run=row["run"], commit=row["commit"],
        mode=row["mode"], mode_source=row["mode_source"], platform=row["platform"], phase=row["phase"],
        device_name=row["device_name"], rank=row["rank"], world_size=row["world_size"],
        tags=dict(row["tags"] or {}), quality_verdict=row["quality_verdict"],
        breakdown=_breakdown(row), profiler_step_count=row["profiler_step_count"] or 0,
        median_step_kernel_time_ms=row["median_step_kernel_time_ms"], group_key=row["group_key"],
        run_index=row["run_index"], run_label=row["run_label"], trace_label=row["trace_label"],
        run_trace_count=row["run_trace_count"],
        reports=reports.get(row["trace_id"], []),
    )


def _shared_tag_notes(traces: list[TraceRun]) -> list[str]:
    """A note for each run tag that several traces share without being the ranks of one job (shown
    as one run, never compared)."""
    notes = []
    for (key, _), members in _by_run(traces).items():
        ranks = [t.rank for t in members]
        if len(members) > 1 and (None in ranks or len(set(ranks)) < len(ranks)):
            files = ", ".join(t.file_name for t in members)
            notes.append(f"{len(members)} traces of {key} share the run tag {members[0].run_label!r} without being the "
                         f"ranks of one job ({files}): they are shown as one run with their spread and not compared "
                         "with each other; give each its own --tag run=... to compare them")
    return notes


def _groups(db: duckdb.DuckDBPyConnection, traces: list[TraceRun], kernel_time: dict[str, float]) -> list[RunGroup]:
    by_run: dict[tuple[str, int], list[CategoryTime]] = {}
    ranks: dict[str, dict[str, int]] = {}  # group -> chart category -> rank (the rest ranks last)
    for row in _rows(db, _CATEGORY_SQL):
        by_run.setdefault((row["group_key"], row["run_index"]), []).append(CategoryTime(
            op_category=row["op_category"], kernel_time_ms=row["kernel_time_ms"], percent=row["percent"]))
        ranks.setdefault(row["group_key"], {})[row["op_category"]] = row["category_rank"]
    groups: dict[str, RunGroup] = {}
    for (key, index), members in _by_run(traces).items():
        first = members[0]
        if key not in groups:
            group_ranks = ranks.get(key, {})
            groups[key] = RunGroup(key=key, model=first.model, mode=first.mode, platform=first.platform,
                                   phase=first.phase, categories=sorted(group_ranks, key=group_ranks.__getitem__),
                                   runs=[])
        categories = by_run.get((key, index), [])
        spread = [kernel_time[t.trace_id] for t in members]
        groups[key].runs.append(RunCategories(
            trace_id=first.trace_id, file_name=first.file_name, run_label=first.run_label,
            trace_ids=[t.trace_id for t in members], ranks=[t.rank for t in members if t.rank is not None],
            kernel_time_ms=sum(c.kernel_time_ms for c in categories), kernel_time_min_ms=min(spread),
            kernel_time_max_ms=max(spread), categories=categories))
    return list(groups.values())


def _regressions(db: duckdb.DuckDBPyConnection) -> list[CategoryChange]:
    return [CategoryChange(**{name: row[name] for name in CategoryChange.model_fields})
            for row in _rows(db, _REGRESSION_SQL, [TOP_REGRESSIONS])]


def _mode_comparisons(db: duckdb.DuckDBPyConnection, gpu_traces: list[TraceRun]) -> list[ModeComparison]:
    breakdown_rows = _rows(db, _MODE_BREAKDOWN_SQL)
    breakdowns = {(r["model"], r["group_platform"], r["mode"]): _with_percents(r) for r in breakdown_rows}
    run_counts = {(r["model"], r["group_platform"], r["mode"]): r["run_count"] for r in breakdown_rows}
    categories: dict[tuple[str, str, str], list[CategoryTime]] = {}
    for row in _rows(db, _MODE_CATEGORY_SQL, [TOP_MODE_CATEGORIES]):
        categories.setdefault((row["model"], row["group_platform"], row["mode"]), []).append(CategoryTime(
            op_category=row["op_category"], kernel_time_ms=row["mean_kernel_time_ms"], percent=row["percent"]))
    sides: dict[tuple[str, str], dict[str, list[str]]] = {}
    platforms: dict[tuple[str, str], str | None] = {}
    for trace in gpu_traces:
        if trace.mode in ("training", "inference"):
            pair = (trace.model, trace.platform or UNKNOWN)
            sides.setdefault(pair, {"training": [], "inference": []})[trace.mode].append(trace.trace_id)
            platforms[pair] = trace.platform

    def side(pair: tuple[str, str], mode: Literal["training", "inference"]) -> ModeSide:
        key = (*pair, mode)
        return ModeSide(mode=mode, trace_ids=sides[pair][mode], run_count=run_counts.get(key, 0),
                        mean_breakdown=breakdowns.get(key, TimeBreakdown()), top_categories=categories.get(key, []))

    comparisons = [ModeComparison(model=pair[0], platform=platforms[pair], training=side(pair, "training"),
                                  inference=side(pair, "inference")) for pair in sides]
    # models run both ways first: they are what this section is for
    comparisons.sort(key=lambda c: (not (c.training.trace_ids and c.inference.trace_ids), c.model.lower(),
                                    c.platform or ""))
    return comparisons


def _reports(db: duckdb.DuckDBPyConnection, tables: set[str], page_dir: Path) -> list[ReportLink]:
    if "analyses" not in tables:
        return []
    top_findings = _TOP_FINDINGS_SQL if "findings" in tables else _NO_FINDINGS_SQL
    links = []
    # analyses of a warehouse no analysis has written to since platform_source was added lack it
    kept = db.execute("select count(*) from duckdb_columns() where table_name = 'analyses' "
                      "and column_name = 'platform_source'").fetchone()
    platform_source = "a.platform_source" if kept and kept[0] else "null as platform_source"
    for row in _rows(db, _REPORTS_SQL.format(top_findings=top_findings, platform_source=platform_source)):
        links.append(ReportLink(
            **{k: row[k] for k in ("trace_id", "trace2_id", "trace2_file_name", "comparison_scope", "platform",
                                   "platform_source", "finding_count", "top_finding_title", "top_finding_impact_percent",
                                   "analyzed_at")},
            analysis_md=str(row["analysis_md"]), href=report_href(_rendered(Path(row["analysis_md"])), page_dir)))
    return links


def _colours(db: duckdb.DuckDBPyConnection, categories: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(timeline part -> colour, category -> colour): the chart_colours seed's, and for each category
    the seed does not list (in name order) one of its spare colours, so no two categories share one."""
    rows = _rows(db, _COLOURS_SQL)
    timeline = {r["name"]: r["colour"] for r in rows if r["role"] == TIMELINE_ROLE}
    named = {r["name"]: r["colour"] for r in rows if r["role"] not in (TIMELINE_ROLE, SPARE_ROLE)}
    spares = [r["colour"] for r in rows if r["role"] == SPARE_ROLE]
    unlisted = sorted(categories - named.keys())
    return timeline, {**named, **{c: spares[i % len(spares)] for i, c in enumerate(unlisted)}}


def _page_categories(groups: list[RunGroup], jobs: list[JobRow], modes: list[ModeComparison],
                     regressions: list[CategoryChange]) -> set[str]:
    return ({c for g in groups for c in g.categories} | {c for j in jobs for c in j.categories}
            | {c.op_category for m in modes for side in (m.training, m.inference) for c in side.top_categories}
            | {c.op_category for c in regressions})


def gather_dashboard(db: duckdb.DuckDBPyConnection, request: DashboardRequest) -> DashboardData:
    """Everything the dashboard shows, from a read-only connection to the warehouse."""
    tables = _tables(db)
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        raise WarehouseError(f"warehouse {request.warehouse} has no {', '.join(missing)} model yet; "
                             f"run `tracelake build --warehouse {request.warehouse}` to bring it up to date")
    reports = _reports(db, tables, request.out_dir)
    reports_by_trace: dict[str, list[ReportLink]] = {}
    for link in sorted(reports, key=lambda r: r.trace2_id is not None):  # standalone report first
        reports_by_trace.setdefault(link.trace_id, []).append(link)
    rows = _rows(db, _RUNS_SQL)
    traces = [_trace_run(row, reports_by_trace) for row in rows]
    # a trace without GPU work is listed in its group but has no kernel time to compare: it is not a
    # run of the regression pairs or of the training / inference means (the marts leave it out)
    gpu_traces = [t for t in traces if t.breakdown.total_time_ms is not None]
    groups = _groups(db, traces, {row["trace_id"]: row["kernel_time_ms"] for row in rows})
    modes, regressions, jobs = _mode_comparisons(db, gpu_traces), _regressions(db), gather_jobs(db, tables)
    timeline, colours = _colours(db, _page_categories(groups, jobs, modes, regressions))
    capture_count = db.execute(_CAPTURE_COUNT_SQL).fetchone()
    return DashboardData(
        warehouse=request.warehouse, generated_at=request.generated_at, tracelake_version=request.tracelake_version,
        trace_count=len(traces), traces=traces, groups=groups, mode_comparisons=modes, regressions=regressions,
        reports=reports, analyses_recorded="analyses" in tables, limits=DashboardLimits(),
        notes=_shared_tag_notes(traces), jobs=jobs, capture_trace_count=capture_count[0] if capture_count else 0,
        timeline_colours=timeline, colours=colours,
    )
