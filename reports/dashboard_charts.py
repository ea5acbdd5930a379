"""The dashboard's charts as Vega-Lite specs, and the vendored Vega bundles that draw them.

A chart is a Vega-Lite spec (a dict) built from the dashboard's data; the page carries each spec as
inline JSON beside the element it is drawn into, and the three library bundles (reports/vendor/:
vega, vega-lite, vega-embed, with their licences) inline, so the page draws its charts offline.
Every category chart stacks the kernel time per category, the collectives among them, with the
colours of the `chart_colours` seed (DashboardData.colours); a tooltip gives each bar's numbers and
the time axis zooms (scroll) and pans (drag), double-click resets it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from tracelake.reports.dashboard_data import RunGroup
from tracelake.reports.dashboard_jobs import JobRow

VENDOR = Path(__file__).parent / "vendor"
VENDOR_SCRIPTS = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")  # load order: each needs the one before
CHART_HEIGHT_PX = 220
STEP_PX = 34  # column width (band + gap) once a chart has more columns than fit its card
COLUMNS_IN_A_CARD = 14  # up to this many columns a chart fills its card's width; more scroll sideways
TILTED_LABEL_CHARS = 9  # column labels longer than this are drawn at an angle so they never overlap
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
TIME_TITLE = "kernel time (ms)"
MAX_BAR_PX = 64

_CONFIG: dict[str, Any] = {
    "font": FONT,
    "view": {"stroke": None},
    "axis": {"labelFontSize": 11, "titleFontSize": 11, "titleFontWeight": 500, "titleColor": "#57606a",
             "labelColor": "#24292f", "gridColor": "#eaeef2", "domainColor": "#d0d7de", "tickColor": "#d0d7de",
             "titlePadding": 8},
    "legend": {"labelFontSize": 11, "symbolType": "square", "symbolSize": 110, "labelLimit": 220,
               "rowPadding": 4, "columnPadding": 14},
}


@cache
def vendor_scripts() -> Markup:
    """The three bundles as inline <script> elements (none contains `</script`, checked by a test)."""
    return Markup("\n".join(f"<script>{(VENDOR / name).read_text(encoding='utf-8')}</script>"
                            for name in VENDOR_SCRIPTS))


def spec_json(spec: dict[str, Any]) -> Markup:
    """A spec as JSON safe inside a <script type="application/json"> element (no `<`, `>`, `&`)."""
    text = json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _unique(labels: list[str]) -> list[str]:
    """Column labels made unique (a repeated label gets its position), so no two columns merge."""
    return [label if labels.count(label) == 1 else f"{label} #{index}" for index, label in enumerate(labels, 1)]


def _colour_scale(categories: list[str], colours: dict[str, str]) -> dict[str, Any]:
    return {"domain": categories, "range": [colours[c] for c in categories]}


def _stacked_columns(rows: list[dict[str, Any]], columns: list[str], categories: list[str], colours: dict[str, str],
                     *, column_title: str, description: str) -> dict[str, Any]:
    tilted = any(len(label) > TILTED_LABEL_CHARS for label in columns)
    # a chart fills its card; with many columns it keeps a readable column width and scrolls sideways
    # (Vega-Lite refuses to fit a chart whose width is set by steps)
    width: dict[str, Any] = ({"width": {"step": STEP_PX}} if len(columns) > COLUMNS_IN_A_CARD
                             else {"width": "container", "autosize": {"type": "fit-x", "contains": "padding"}})
    return {
        "description": description,
        **width,
        "height": CHART_HEIGHT_PX,
        "config": _CONFIG,
        "data": {"values": rows},
        "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["y"]}, "bind": "scales"}],
        # a column is at most MAX_BAR_PX wide: one run does not fill the card as one block
        "mark": {"type": "bar", "stroke": "#ffffff", "strokeWidth": 0.5,
                 "width": {"expr": f"min({MAX_BAR_PX}, bandwidth('x'))"}},
        "encoding": {
            "x": {"field": "column", "type": "nominal", "sort": columns, "title": column_title,
                  "scale": {"paddingInner": 0.25},
                  "axis": {"labelAngle": -35 if tilted else 0, "labelAlign": "right" if tilted else "center",
                           "labelLimit": 140, "labelOverlap": False}},
            "y": {"field": "kernel_time_ms", "type": "quantitative", "stack": "zero", "title": TIME_TITLE,
                  "axis": {"tickCount": 5}},
            "color": {"field": "category", "type": "nominal", "sort": categories,
                      "scale": _colour_scale(categories, colours),
                      "legend": {"title": None, "orient": "bottom", "direction": "horizontal",
                                 "columns": 4 if len(categories) > 4 else len(categories)}},
            "order": {"field": "stack_order", "type": "quantitative"},
            "tooltip": [
                {"field": "column", "title": column_title},
                {"field": "category", "title": "category"},
                {"field": "kernel_time_ms", "type": "quantitative", "title": TIME_TITLE, "format": ",.3f"},
                {"field": "percent", "type": "quantitative", "title": "% of its kernel time", "format": ".1f"},
                {"field": "detail", "title": "column"},
            ],
        },
    }


def run_chart(group: RunGroup, colours: dict[str, str]) -> dict[str, Any]:
    """Kernel time per category of each run of a group: one column per run, in run order."""
    labels = _unique([run.run_label for run in group.runs])
    order = {category: index for index, category in enumerate(group.categories)}
    rows = []
    for label, run in zip(labels, group.runs, strict=True):
        if len(run.trace_ids) > 1:
            who = f"{len(run.ranks)} ranks" if len(run.ranks) == len(run.trace_ids) else f"{len(run.trace_ids)} traces"
            detail = (f"mean of {who}: {run.kernel_time_ms:,.3f} ms, {run.kernel_time_min_ms:,.3f}"
                      f"-{run.kernel_time_max_ms:,.3f} ms across them")
        else:
            detail = f"{run.file_name}: {run.kernel_time_ms:,.3f} ms kernel time"
        rows += [{"column": label, "category": c.op_category, "kernel_time_ms": c.kernel_time_ms,
                  "percent": c.percent, "detail": detail, "stack_order": order.get(c.op_category, len(order))}
                 for c in run.categories]
    return _stacked_columns(rows, labels, group.categories, colours, column_title="run",
                            description=f"kernel time per category and run, {group.key}")


def job_chart(job: JobRow, colours: dict[str, str]) -> dict[str, Any]:
    """Kernel time per category (collectives included) of each rank of a job, one column per rank."""
    labels = [f"rank {rank.rank}" for rank in job.ranks]
    order = {category: index for index, category in enumerate(job.categories)}
    rows = []
    for label, rank in zip(labels, job.ranks, strict=True):
        total = sum(c.kernel_time_ms for c in rank.categories)
        rows += [{"column": label, "category": c.category, "kernel_time_ms": c.kernel_time_ms, "percent": c.percent,
                  "detail": f"{rank.file_name}: {total:,.3f} ms kernel time",
                  "stack_order": order.get(c.category, len(order))}
                 for c in rank.categories]
    return _stacked_columns(rows, labels, job.categories, colours, column_title="rank",
                            description=f"kernel time per category and rank, job {job.job_id}")
