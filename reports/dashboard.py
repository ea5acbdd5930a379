"""The dashboard page: `index.html` rendered from `DashboardData` (jinja2, HTML autoescape) with inline
SVG charts, and `dashboard.json`, the same model's dump.

The page is self-contained: inline CSS, inline SVG, a few lines of inline script (filters by
model / mode / platform, shown only when scripts run); no fonts, images or scripts from anywhere
else, so it opens from disk with no server and no network.
"""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from tracelake.core.templates import template_environment
from tracelake.reports import svg_charts
from tracelake.reports.dashboard_data import REST_CATEGORY, DashboardData, RunGroup, TimeBreakdown, TraceRun
from tracelake.reports.dashboard_jobs import COLLECTIVES, JobRow
from tracelake.reports.svg_charts import BREAKDOWN_SEGMENTS, Column, Segment

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "dashboard.html.j2"
INDEX = "index.html"
DATA_JSON = "dashboard.json"
DASH = "\u2014"

_BREAKDOWN_FIELDS = ("computation", "exposed_comm", "exposed_memcpy", "idle")


def fmt_ms(value: float | None) -> str:
    """Milliseconds: 3 decimals under 10 ms, 2 under 1000, none above; a dash when missing."""
    if value is None:
        return DASH
    if abs(value) < 10:
        return f"{value:,.3f}"
    return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"


def fmt_percent(value: float | None, signed: bool = False) -> str:
    if value is None:
        return DASH
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


def category_colour(category: str) -> str:
    return svg_charts.REST_COLOUR if category == REST_CATEGORY else svg_charts.category_colour(category)


def breakdown_parts(breakdown: TimeBreakdown) -> list[tuple[str, str, float | None, float | None]]:
    """(label, colour, ms, percent) of the four timeline parts, in stacking order."""
    return [(label, colour, getattr(breakdown, f"{field}_time_ms"), getattr(breakdown, f"{field}_time_percent"))
            for (label, colour), field in zip(BREAKDOWN_SEGMENTS, _BREAKDOWN_FIELDS, strict=True)]


def breakdown_bar(breakdown: TimeBreakdown, width: float = 260, height: float = 18) -> Markup:
    segments = [Segment(label, ms or 0.0, colour, f"{label}: {fmt_ms(ms)} ms ({fmt_percent(pct)})")
                for label, colour, ms, pct in breakdown_parts(breakdown)]
    return Markup(svg_charts.stacked_bar(segments, width=width, height=height,
                                         label=f"GPU time breakdown, E2E {fmt_ms(breakdown.total_time_ms)} ms"))


def run_chart(group: RunGroup, width: float = 620, height: float = 250) -> Markup:
    columns = []
    for run in group.runs:
        segments = tuple(
            Segment(c.op_category, c.kernel_time_ms, category_colour(c.op_category),
                    f"{run.run_label} \u00b7 {c.op_category}: {fmt_ms(c.kernel_time_ms)} ms ({fmt_percent(c.percent)})")
            for c in run.categories)
        if len(run.trace_ids) > 1:
            who = f"{len(run.ranks)} ranks" if len(run.ranks) == len(run.trace_ids) else f"{len(run.trace_ids)} traces"
            tooltip = (f"{run.run_label} ({who}): {fmt_ms(run.kernel_time_ms)} ms kernel time per trace (mean), "
                       f"{fmt_ms(run.kernel_time_min_ms)}-{fmt_ms(run.kernel_time_max_ms)} ms across them")
        else:
            tooltip = f"{run.run_label} ({run.file_name}): {fmt_ms(run.kernel_time_ms)} ms kernel time"
        columns.append(Column(run.run_label, tooltip, segments))
    return Markup(svg_charts.column_chart(columns, unit="kernel time (ms)", width=width, height=height,
                                          label=f"kernel time per category and run, {group.key}"))


def job_chart(job: JobRow, height: float = 250) -> Markup:
    """Kernel time per category (collectives included) of each rank of a job, one column per rank."""
    columns = []
    for rank in job.ranks:
        total = sum(c.kernel_time_ms for c in rank.categories)
        segments = tuple(
            Segment(c.category, c.kernel_time_ms, category_colour(c.category),
                    f"rank {rank.rank} \u00b7 {c.category}: {fmt_ms(c.kernel_time_ms)} ms ({fmt_percent(c.percent)})")
            for c in rank.categories)
        columns.append(Column(f"rank {rank.rank}", f"rank {rank.rank} ({rank.file_name}): {fmt_ms(total)} ms kernel time",
                              segments))
    width = max(620.0, 56.0 + 40.0 * len(columns))
    return Markup(svg_charts.column_chart(columns, unit="kernel time (ms)", width=width, height=height,
                                          label=f"kernel time per category and rank, job {job.job_id}"))


def job_collective_share(job: JobRow) -> float | None:
    """The collectives' share of the job's kernel time over all its ranks, %."""
    total = sum(c.kernel_time_ms for rank in job.ranks for c in rank.categories)
    collectives = sum(c.kernel_time_ms for rank in job.ranks for c in rank.categories if c.category == COLLECTIVES)
    return 100 * collectives / total if total else None


def value_bar(value: float, maximum: float, colour: str = "#c03d3e", width: float = 140) -> Markup:
    return Markup(svg_charts.value_bar(value, maximum, colour=colour, width=width))


def swatch(colour: str) -> Markup:
    return Markup(svg_charts.legend_swatch(colour))


def render_dashboard(data: DashboardData) -> str:
    """index.html's text."""
    environment = template_environment(TEMPLATES)
    environment.autoescape = True  # HTML: every value from the warehouse is escaped
    traces_by_id: dict[str, TraceRun] = {t.trace_id: t for t in data.traces}
    environment.globals.update(
        breakdown_bar=breakdown_bar, breakdown_parts=breakdown_parts, run_chart=run_chart, job_chart=job_chart,
        job_collective_share=job_collective_share,
        value_bar=value_bar,
        swatch=swatch, category_colour=category_colour, trace_of=traces_by_id.__getitem__,
        breakdown_legend=[(label, colour) for label, colour in BREAKDOWN_SEGMENTS],
    )
    environment.filters.update(ms=fmt_ms, pct=fmt_percent)
    return environment.get_template(TEMPLATE).render(data=data)


def write_dashboard(data: DashboardData, folder: Path) -> Path:
    """Write index.html and dashboard.json into folder; returns index.html's path."""
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / INDEX
    index.write_text(render_dashboard(data), encoding="utf-8")
    (folder / DATA_JSON).write_text(data.model_dump_json(indent=1), encoding="utf-8")
    return index
