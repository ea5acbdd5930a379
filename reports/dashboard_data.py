"""What `tracelake dashboard` shows, gathered from the warehouse: DuckDB in, `DashboardData` out.

Runs are grouped by (model, mode, platform). The model is the `model` tag, else the trace's file
name without `.json`/`.json.gz` (so re-profiles of one script line up even untagged); mode and
platform come from the `runs` view (tag, else what the trace shows). Inside a group the runs are
ordered by the `run` tag (natural order: r2 before r10; untagged runs last), then by ingest time;
"consecutive runs" are neighbours in that order.

The sets are built in SQL over the marts (`runs`, `ops_summary_by_category`, and the `analyses` /
`findings` tables that `tracelake analyze` records, when they exist); Python only orders the runs
(natural sort over one row per trace) and arranges the rows into the pydantic models.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import pyarrow as pa
from pydantic import BaseModel

from tracelake.core.errors import WarehouseError

MAX_CHART_CATEGORIES = 8  # a group's run-over-run chart shows its 8 largest categories, the rest summed
TOP_REGRESSIONS = 15  # the regression table's length
TOP_MODE_CATEGORIES = 5  # categories listed per side in the training vs inference comparison
REST_CATEGORY = "smaller categories"
UNKNOWN = "unknown"
REQUIRED_TABLES = ("runs", "ops_summary_by_category")
_RUN_ORDER = "dashboard_run_order"  # the registered (in-memory) table of run positions
_DIGITS = re.compile(r"(\d+)")


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
    model_source: Literal["tag", "file name"]
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


# ---- SQL ------------------------------------------------------------------------------------------

_RUNS_SQL = r"""
with serving_phases as (
    -- a serving trace's phases: a decode run is never compared with a prefill + decode run
    select trace_id, string_agg(distinct phase, '+' order by phase) as phase
    from phases
    where phase in ('prefill', 'decode', 'mixed', 'denoise')
    group by trace_id
)

select
    runs.trace_id, runs.file_name, runs.ingested_at,
    -- untagged: the file name, less a rank number (rank0 / rank_1 / rank-2 are one model)
    coalesce(runs.model, regexp_replace(regexp_replace(runs.file_name, '(\.json)?(\.gz)?$', ''),
                                        '[_.-]?rank[_-]?\d+', '')) as model,
    case when runs.model is null then 'file name' else 'tag' end as model_source,
    runs.run, runs.commit, runs.mode, runs.mode_source, runs.platform, serving_phases.phase, runs.device_name,
    traces.rank, traces.world_size, traces.source_path, runs.tags, runs.quality_verdict,
    runs.total_time_ms, runs.computation_time_ms, runs.exposed_comm_time_ms, runs.exposed_memcpy_time_ms,
    runs.idle_time_ms, runs.computation_time_percent, runs.exposed_comm_time_percent,
    runs.exposed_memcpy_time_percent, runs.idle_time_percent, runs.profiler_step_count, runs.median_step_kernel_time_ms
from runs
inner join traces on traces.trace_id = runs.trace_id
left join serving_phases on serving_phases.trace_id = runs.trace_id
"""

# a run's category time: the mean over its traces (the ranks of one job)
_RUN_CATEGORIES_CTE = f"""run_categories as (
    select o.group_key, o.run_index, c.op_category, sum(c.total_direct_kernel_time_ms) / any_value(o.run_traces) as ms
    from {_RUN_ORDER} o
    join ops_summary_by_category c on c.trace_id = o.trace_id
    group by all
)"""

_CATEGORY_SQL = f"""
with {_RUN_CATEGORIES_CTE},

category_ranks as (
    select
        group_key, op_category,
        row_number() over (partition by group_key order by sum(ms) desc, op_category) as category_rank
    from run_categories
    group by group_key, op_category
),

charted as (
    select
        p.group_key, p.run_index,
        case when r.category_rank <= $max_categories then p.op_category else $rest end as op_category,
        min(r.category_rank) as category_rank,
        sum(p.ms) as kernel_time_ms
    from run_categories p
    join category_ranks r on r.group_key = p.group_key and r.op_category = p.op_category
    group by all
)

select
    group_key, run_index, op_category, category_rank, kernel_time_ms,
    100 * kernel_time_ms / nullif(sum(kernel_time_ms) over (partition by group_key, run_index), 0) as percent
from charted
order by group_key, run_index, category_rank
"""

_REGRESSION_SQL = f"""
with {_RUN_CATEGORIES_CTE},

runs as (
    select distinct group_key, run_index from {_RUN_ORDER}
),

pairs as (
    select group_key, lag(run_index) over (partition by group_key order by run_index) as before_run, run_index as after_run
    from runs
),

pair_categories as (
    select distinct p.group_key, p.before_run, p.after_run, c.op_category
    from pairs p
    join run_categories c on c.group_key = p.group_key and c.run_index in (p.before_run, p.after_run)
    where p.before_run is not null
),

changes as (
    select
        pc.group_key, pc.before_run, pc.after_run, pc.op_category,
        coalesce(b.ms, 0) as before_ms,
        coalesce(a.ms, 0) as after_ms
    from pair_categories pc
    left join run_categories b on b.group_key = pc.group_key and b.run_index = pc.before_run and b.op_category = pc.op_category
    left join run_categories a on a.group_key = pc.group_key and a.run_index = pc.after_run and a.op_category = pc.op_category
)

select
    group_key, op_category, before_run, after_run, before_ms, after_ms,
    after_ms - before_ms as change_ms,
    case when before_ms > 0 then 100 * (after_ms - before_ms) / before_ms end as change_percent
from changes
where after_ms > before_ms
order by change_ms desc, group_key, op_category
limit $limit
"""

_TRACE_KERNEL_TIME_SQL = f"""
select o.trace_id, sum(c.total_direct_kernel_time_ms) as kernel_time_ms
from {_RUN_ORDER} o
join ops_summary_by_category c on c.trace_id = o.trace_id
group by o.trace_id
"""

_MODE_BREAKDOWN_SQL = f"""
select
    o.model, o.group_platform, split_part(o.mode, '-', 1) as mode,  -- training-graph is training
    avg(r.total_time_ms) as total_time_ms,
    avg(r.computation_time_ms) as computation_time_ms,
    avg(r.exposed_comm_time_ms) as exposed_comm_time_ms,
    avg(r.exposed_memcpy_time_ms) as exposed_memcpy_time_ms,
    avg(r.idle_time_ms) as idle_time_ms
from {_RUN_ORDER} o
join runs r on r.trace_id = o.trace_id
where split_part(o.mode, '-', 1) in ('training', 'inference') and r.total_time_ms is not null
group by all
"""

_MODE_CATEGORY_SQL = f"""
with purposes as (
    select model, group_platform, split_part(mode, '-', 1) as mode, trace_id  -- training-graph is training
    from {_RUN_ORDER}
),

sides as (
    select model, group_platform, mode, trace_id, count(*) over (partition by model, group_platform, mode) as run_count
    from purposes
    where mode in ('training', 'inference')
),

side_categories as (
    select s.model, s.group_platform, s.mode, c.op_category,
        sum(c.total_direct_kernel_time_ms) / any_value(s.run_count) as mean_ms,
        sum(c.total_direct_kernel_time_ms) as side_ms
    from sides s
    join ops_summary_by_category c on c.trace_id = s.trace_id
    group by all
),

ranked as (
    select *,
        100 * side_ms / nullif(sum(side_ms) over (partition by model, group_platform, mode), 0) as percent,
        row_number() over (partition by model, group_platform, mode order by side_ms desc, op_category) as category_rank
    from side_categories
)

select model, group_platform, mode, op_category, mean_ms, percent
from ranked
where category_rank <= $limit
order by model, group_platform, mode, category_rank
"""

_REPORTS_SQL = """
with top_findings as (
    {top_findings}
)

select
    a.trace_id, a.trace2_id, t2.file_name as trace2_file_name, a.comparison_scope, a.platform,
    a.analysis_md, a.finding_count, a.analyzed_at,
    f.title as top_finding_title, f.impact_mid_percent as top_finding_impact_percent
from analyses a
join runs t on t.trace_id = a.trace_id
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

def _rows(db: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    result = db.execute(sql, params or {})
    columns = [d[0] for d in result.description]
    return [dict(zip(columns, row, strict=True)) for row in result.fetchall()]


def _tables(db: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in db.execute(
        "select table_name from information_schema.tables where table_schema = current_schema()").fetchall()}


def _natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """'r10' after 'r9': digit runs compare as numbers, the rest case-insensitively."""
    return tuple((0, int(part)) if part.isdigit() else (1, part.lower()) for part in _DIGITS.split(text) if part)


def group_key(model: str, mode: str | None, platform: str | None, phase: str | None = None) -> str:
    key = f"{model} | {mode or UNKNOWN} | {platform or UNKNOWN}"
    return f"{key} | {phase}" if phase else key


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


# ---- the gathering --------------------------------------------------------------------------------

def _run_identity(row: dict[str, Any]) -> str:
    """What makes traces one run of their group: the run tag; untagged, the folder a distributed
    job's rank traces were written to; else the trace alone."""
    if row["run"] is not None:
        return f"run {row['run']}"
    if row["rank"] is not None and row["source_path"]:
        return f"job {Path(row['source_path']).parent}"
    return f"trace {row['trace_id']}"


def _run_label(row: dict[str, Any]) -> str:
    if row["run"] is not None:
        return row["run"]
    if row["rank"] is not None and row["source_path"]:
        return Path(row["source_path"]).parent.name or "job"
    return row["ingested_at"].strftime("%m-%d %H:%M:%S")


def _ordered_runs(rows: list[dict[str, Any]], reports: dict[str, list[ReportLink]]) -> tuple[list[TraceRun], list[str]]:
    """Every trace with its group, its run's position and label; and a note for each run tag that
    several traces share without being the ranks of one job (shown as one run, never compared)."""
    def sort_key(row: dict[str, Any]) -> tuple:
        run = row["run"]
        return (row["group"], run is None, _natural_key(run) if run is not None else (), row["ingested_at"],
                row["rank"] if row["rank"] is not None else -1, row["trace_id"])

    for row in rows:
        row["group"] = group_key(row["model"], row["mode"], row["platform"], row["phase"])
    members: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=sort_key):
        members.setdefault((row["group"], _run_identity(row)), []).append(row)
    traces: list[TraceRun] = []
    notes: list[str] = []
    position: dict[str, int] = {}
    for (key, _), run_rows in members.items():  # in run order: dicts keep insertion order
        position[key] = position.get(key, 0) + 1
        label = _run_label(run_rows[0])
        ranks = [r["rank"] for r in run_rows]
        if len(run_rows) > 1 and (None in ranks or len(set(ranks)) < len(ranks)):
            files = ", ".join(r["file_name"] for r in run_rows)
            notes.append(f"{len(run_rows)} traces of {key} share the run tag {label!r} without being the ranks of one "
                         f"job ({files}): they are shown as one run with their spread and not compared with each "
                         "other; give each its own --tag run=... to compare them")
        for row in run_rows:
            traces.append(TraceRun(
                trace_id=row["trace_id"], file_name=row["file_name"], ingested_at=row["ingested_at"],
                model=row["model"], model_source=row["model_source"], run=row["run"], commit=row["commit"],
                mode=row["mode"], mode_source=row["mode_source"], platform=row["platform"], phase=row["phase"],
                device_name=row["device_name"], rank=row["rank"], world_size=row["world_size"],
                tags=dict(row["tags"] or {}), quality_verdict=row["quality_verdict"],
                breakdown=_breakdown(row), profiler_step_count=row["profiler_step_count"] or 0,
                median_step_kernel_time_ms=row["median_step_kernel_time_ms"], group_key=key,
                run_index=position[key], run_label=label, run_trace_count=len(run_rows),
                reports=reports.get(row["trace_id"], []),
            ))
    return traces, notes


def _run_order_table(traces: list[TraceRun]) -> pa.Table:
    counts: dict[tuple[str, int], int] = {}
    for t in traces:
        counts[(t.group_key, t.run_index)] = counts.get((t.group_key, t.run_index), 0) + 1
    return pa.table({
        "trace_id": [t.trace_id for t in traces],
        "group_key": [t.group_key for t in traces],
        "run_index": pa.array([t.run_index for t in traces], pa.int32()),
        "run_traces": pa.array([counts[(t.group_key, t.run_index)] for t in traces], pa.int32()),
        "model": [t.model for t in traces],
        "mode": pa.array([t.mode for t in traces], pa.string()),
        "group_platform": [t.platform or UNKNOWN for t in traces],
    })


def _groups(db: duckdb.DuckDBPyConnection, traces: list[TraceRun]) -> list[RunGroup]:
    rows = _rows(db, _CATEGORY_SQL, {"max_categories": MAX_CHART_CATEGORIES, "rest": REST_CATEGORY})
    by_run: dict[tuple[str, int], list[CategoryTime]] = {}
    ranks: dict[str, dict[str, int]] = {}  # group -> chart category -> rank (the rest ranks last)
    for row in rows:
        by_run.setdefault((row["group_key"], row["run_index"]), []).append(CategoryTime(
            op_category=row["op_category"], kernel_time_ms=row["kernel_time_ms"], percent=row["percent"]))
        ranks.setdefault(row["group_key"], {})[row["op_category"]] = row["category_rank"]
    trace_totals = dict(db.execute(_TRACE_KERNEL_TIME_SQL).fetchall())
    runs: dict[tuple[str, int], list[TraceRun]] = {}
    for trace in traces:
        runs.setdefault((trace.group_key, trace.run_index), []).append(trace)
    groups: dict[str, RunGroup] = {}
    for (key, index), members in runs.items():
        first = members[0]
        if key not in groups:
            group_ranks = ranks.get(key, {})
            groups[key] = RunGroup(key=key, model=first.model, mode=first.mode, platform=first.platform,
                                   phase=first.phase, categories=sorted(group_ranks, key=group_ranks.__getitem__),
                                   runs=[])
        categories = by_run.get((key, index), [])
        spread = [trace_totals.get(t.trace_id, 0.0) for t in members]
        groups[key].runs.append(RunCategories(
            trace_id=first.trace_id, file_name=first.file_name, run_label=first.run_label,
            trace_ids=[t.trace_id for t in members], ranks=[t.rank for t in members if t.rank is not None],
            kernel_time_ms=sum(c.kernel_time_ms for c in categories), kernel_time_min_ms=min(spread),
            kernel_time_max_ms=max(spread), categories=categories))
    return list(groups.values())


def _regressions(db: duckdb.DuckDBPyConnection, traces: list[TraceRun]) -> list[CategoryChange]:
    first_of = {}
    for t in traces:
        first_of.setdefault((t.group_key, t.run_index), t)
    changes = []
    for row in _rows(db, _REGRESSION_SQL, {"limit": TOP_REGRESSIONS}):
        before, after = first_of[(row["group_key"], row["before_run"])], first_of[(row["group_key"], row["after_run"])]
        changes.append(CategoryChange(
            group_key=row["group_key"], model=after.model, mode=after.mode, platform=after.platform,
            op_category=row["op_category"], before_trace_id=before.trace_id, before_file_name=before.file_name,
            before_run_label=before.run_label, after_trace_id=after.trace_id, after_file_name=after.file_name,
            after_run_label=after.run_label, before_ms=row["before_ms"], after_ms=row["after_ms"],
            change_ms=row["change_ms"], change_percent=row["change_percent"]))
    return changes


def _mode_comparisons(db: duckdb.DuckDBPyConnection, traces: list[TraceRun]) -> list[ModeComparison]:
    breakdowns = {(r["model"], r["group_platform"], r["mode"]): _with_percents(r)
                  for r in _rows(db, _MODE_BREAKDOWN_SQL)}
    categories: dict[tuple[str, str, str], list[CategoryTime]] = {}
    for row in _rows(db, _MODE_CATEGORY_SQL, {"limit": TOP_MODE_CATEGORIES}):
        categories.setdefault((row["model"], row["group_platform"], row["mode"]), []).append(CategoryTime(
            op_category=row["op_category"], kernel_time_ms=row["mean_ms"], percent=row["percent"]))
    sides: dict[tuple[str, str], dict[str, list[str]]] = {}
    platforms: dict[tuple[str, str], str | None] = {}
    for trace in traces:
        if trace.mode in ("training", "inference"):
            pair = (trace.model, trace.platform or UNKNOWN)
            sides.setdefault(pair, {"training": [], "inference": []})[trace.mode].append(trace.trace_id)
            platforms[pair] = trace.platform

    def side(pair: tuple[str, str], mode: Literal["training", "inference"]) -> ModeSide:
        key = (*pair, mode)
        return ModeSide(mode=mode, trace_ids=sides[pair][mode], mean_breakdown=breakdowns.get(key, TimeBreakdown()),
                        top_categories=categories.get(key, []))

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
    for row in _rows(db, _REPORTS_SQL.format(top_findings=top_findings)):
        links.append(ReportLink(
            **{k: row[k] for k in ("trace_id", "trace2_id", "trace2_file_name", "comparison_scope", "platform",
                                   "finding_count", "top_finding_title", "top_finding_impact_percent",
                                   "analyzed_at")},
            analysis_md=str(row["analysis_md"]), href=report_href(_rendered(Path(row["analysis_md"])), page_dir)))
    return links


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
    traces, notes = _ordered_runs(_rows(db, _RUNS_SQL), reports_by_trace)
    # a trace without GPU work is listed in its group but has no kernel time to compare: it is not a
    # run of the regression pairs or of the training / inference means
    gpu_traces = [t for t in traces if t.breakdown.total_time_ms is not None]
    db.register(_RUN_ORDER, _run_order_table(gpu_traces))
    try:
        groups = _groups(db, traces)
        regressions = _regressions(db, gpu_traces)
        comparisons = _mode_comparisons(db, gpu_traces)
    finally:
        db.unregister(_RUN_ORDER)
    return DashboardData(
        warehouse=request.warehouse, generated_at=request.generated_at, tracelake_version=request.tracelake_version,
        trace_count=len(traces), traces=traces, groups=groups, mode_comparisons=comparisons,
        regressions=regressions, reports=reports, analyses_recorded="analyses" in tables, limits=DashboardLimits(),
        notes=notes,
    )
