"""The top changes of an op / kernel diff (`tracelake.diff(a, b).plot()`): one horizontal bar per
row, its time change in ms (candidate - baseline; slower to the right, red), largest absolute
change at the top. A matplotlib Figure (Agg canvas, no pyplot state): a notebook shows it, and
`fig.savefig(path)` writes it. Names are drawn as plain text (no mathtext)."""

from __future__ import annotations

import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tracelake.core.text_format import clip, one_line

LABEL_CHARS = 60
BAR_HEIGHT_INCHES = 0.32
SLOWER, FASTER = "#c03d3e", "#3274a1"


def _label(row: dict, with_dims: bool) -> str:
    name = one_line(row["name"])
    if with_dims and row.get("input_dims"):
        name = f"{name} {one_line(row['input_dims'])}"
    return f"{clip(name, LABEL_CHARS)} [{row['status']}]"


def plot_top_changes(frame: pl.DataFrame, title: str, top: int = 15) -> Figure:
    """Bars of the `top` rows of a diff frame (ops or kernels) by absolute `delta_ms`."""
    rows = frame.sort(pl.col("delta_ms").abs(), descending=True).head(top).to_dicts()
    figure = Figure(figsize=(10, 1.2 + BAR_HEIGHT_INCHES * max(len(rows), 1)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rows.reverse()  # largest at the top
    labels = [_label(row, "input_dims" in row) for row in rows]
    deltas = [row["delta_ms"] for row in rows]
    axes.barh(range(len(rows)), deltas, color=[SLOWER if d > 0 else FASTER for d in deltas])
    axes.set_yticks(range(len(rows)), labels, fontsize=8)
    for tick in axes.get_yticklabels():
        tick.set_usetex(False)
        tick.set_parse_math(False)
    axes.axvline(0, color="#444444", linewidth=0.8)
    axes.set_xlabel("time change, ms per trace (candidate − baseline; > 0 slower)")
    axes.set_title(title, loc="left", fontsize=10)
    return figure
