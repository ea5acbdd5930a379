"""The dashboard page: `index.html` rendered from `DashboardData` (jinja2, HTML autoescape), and
`dashboard.json`, the same model's dump.

The page is self-contained: inline CSS, the category charts as Vega-Lite specs drawn by the vendored
Vega bundles inlined into the page (reports/dashboard_charts.py), the small bars in the tables as
plain HTML, and a few lines of inline script (filters by model / mode / platform, sortable tables);
no fonts, images or scripts from anywhere else, so it opens from disk with no server and no network.
"""

from __future__ import annotations

from pathlib import Path

from markupsafe import Markup

from tracelake.core.templates import template_environment
from tracelake.reports import dashboard_charts
from tracelake.reports.dashboard_data import DashboardData, RunGroup, TimeBreakdown, TraceRun
from tracelake.reports.dashboard_jobs import COLLECTIVES, JobRow

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE = "dashboard.html.j2"
INDEX = "index.html"
DATA_JSON = "dashboard.json"
DASH = "\u2014"
UNKNOWN_PLATFORM = "platform unknown"

# the four parts of the GPU time breakdown: chart_colours' timeline names and TimeBreakdown's fields
_BREAKDOWN = (("Computation", "computation"), ("Exposed communication", "exposed_comm"),
              ("Exposed memcpy", "exposed_memcpy"), ("Idle", "idle"))


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


def platform_label(platform: str | None) -> str:
    """How the page names a platform, everywhere it shows one (the one place to say how it was known)."""
    return platform or UNKNOWN_PLATFORM


class Page:
    """The helpers the template calls, bound to one DashboardData (its colours)."""

    def __init__(self, data: DashboardData) -> None:
        self.data = data

    def colour(self, category: str) -> str:
        return self.data.colours[category]

    def breakdown_parts(self, breakdown: TimeBreakdown) -> list[tuple[str, str, float | None, float | None]]:
        """(label, colour, ms, percent) of the four timeline parts, in stacking order."""
        return [(label, self.data.timeline_colours[label], getattr(breakdown, f"{field}_time_ms"),
                 getattr(breakdown, f"{field}_time_percent")) for label, field in _BREAKDOWN]

    def breakdown_legend(self) -> list[tuple[str, str]]:
        return [(label, self.data.timeline_colours[label]) for label, _ in _BREAKDOWN]

    def breakdown_bar(self, breakdown: TimeBreakdown, height: int = 16) -> Markup:
        """The breakdown as one bar of four coloured parts (plain HTML), each with its numbers on hover."""
        total = breakdown.total_time_ms or 0.0
        parts = [Markup('<span style="width: {:.3f}%; background: {}" title="{}"></span>').format(
                     100 * (ms or 0.0) / total, colour, f"{label}: {fmt_ms(ms)} ms ({fmt_percent(pct)})")
                 for label, colour, ms, pct in self.breakdown_parts(breakdown) if total and ms]
        label = f"GPU time breakdown, E2E {fmt_ms(breakdown.total_time_ms)} ms"
        return Markup('<div class="bar" role="img" aria-label="{}" style="height: {}px">{}</div>').format(
            label, height, Markup("").join(parts))

    def value_bar(self, value: float, maximum: float) -> Markup:
        share = 100 * value / maximum if maximum > 0 else 0.0
        return Markup('<div class="bar value-bar"><span style="width: {:.3f}%"></span></div>').format(share)

    def swatch(self, colour: str) -> Markup:
        return Markup('<span class="swatch" style="background: {}"></span>').format(colour)

    def run_chart(self, group: RunGroup) -> dict:
        return dashboard_charts.run_chart(group, self.data.colours)

    def job_chart(self, job: JobRow) -> dict:
        return dashboard_charts.job_chart(job, self.data.colours)


def job_collective_share(job: JobRow) -> float | None:
    """The collectives' share of the job's kernel time over all its ranks, %."""
    total = sum(c.kernel_time_ms for rank in job.ranks for c in rank.categories)
    collectives = sum(c.kernel_time_ms for rank in job.ranks for c in rank.categories if c.category == COLLECTIVES)
    return 100 * collectives / total if total else None


def render_dashboard(data: DashboardData) -> str:
    """index.html's text."""
    environment = template_environment(TEMPLATES)
    environment.autoescape = True  # HTML: every value from the warehouse is escaped
    traces_by_id: dict[str, TraceRun] = {t.trace_id: t for t in data.traces}
    page = Page(data)
    environment.globals.update(
        page=page, job_collective_share=job_collective_share, trace_of=traces_by_id.__getitem__,
        vendor_scripts=dashboard_charts.vendor_scripts,
    )
    environment.filters.update(ms=fmt_ms, pct=fmt_percent, platform=platform_label, spec=dashboard_charts.spec_json)
    return environment.get_template(TEMPLATE).render(data=data)


def write_dashboard(data: DashboardData, folder: Path) -> Path:
    """Write index.html and dashboard.json into folder; returns index.html's path."""
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / INDEX
    index.write_text(render_dashboard(data), encoding="utf-8")
    (folder / DATA_JSON).write_text(data.model_dump_json(indent=1), encoding="utf-8")
    return index
