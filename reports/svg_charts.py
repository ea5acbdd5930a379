"""Inline SVG charts for the dashboard: pure functions from numbers and labels to SVG markup.

Every function returns a self-contained inline ``<svg>`` element (no scripts, no namespace URL, no
external references: it is meant to sit inside an HTML page) and escapes every piece of text it
places, so labels taken from trace files or tags cannot break the page. Hover text is an SVG
``<title>``. Colours: the GPU time breakdown uses the same four colours as ``reports/plot.py``; op
categories get a fixed colour each (`category_colour`), so one category has one colour on the
whole page and from one dashboard to the next.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
TEXT_COLOUR = "#24292f"
MUTED_COLOUR = "#57606a"
GRID_COLOUR = "#d8dee4"
CHAR_WIDTH_PX = 0.6  # average glyph width as a share of the font size (sans-serif, mixed case)

# (label, colour) of the GPU time breakdown segments, in stacking order; the colours are
# reports/plot.py's, so the dashboard and perf_improvement.png agree.
BREAKDOWN_SEGMENTS = (
    ("Computation", "#3274a1"),
    ("Exposed communication", "#c03d3e"),
    ("Exposed memcpy", "#9372b2"),
    ("Idle", "#b0b0b0"),
)

# TraceLens op categories that most traces have, each with a fixed colour; other categories take a
# colour from the spare palette by a hash of their name (stable from one dashboard to the next).
_CATEGORY_COLOURS = {
    "GEMM": "#3274a1",
    "elementwise": "#e1812c",
    "SDPA_fwd": "#3a923a",
    "SDPA_bwd": "#7fc97f",
    "InferenceAttention": "#2ca089",
    "NORM_fwd": "#9372b2",
    "NORM_bwd": "#c5b0d5",
    "reduce": "#845b53",
    "CONV_fwd": "#d684bd",
    "CONV_bwd": "#f7b6d2",
    "triton": "#a9aa35",
    "multi_tensor_apply": "#17becf",
    "GroupedGEMM_fwd": "#1f5f8b",
    "MoE_aux": "#bcbd22",
    "other": "#7f7f7f",
    "collectives": "#c03d3e",  # the exposed-communication colour of the breakdown bars
}
_SPARE_COLOURS = ("#ff9896", "#98df8a", "#9edae5", "#c49c94", "#ffbb78", "#aec7e8",
                  "#dbdb8d", "#6b6ecf", "#e7969c", "#637939", "#8c6d31")
REST_COLOUR = "#d0d7de"  # the "smaller categories" remainder


@dataclass(frozen=True)
class Segment:
    """One piece of a stacked bar: its value (any unit), colour and hover text."""

    label: str
    value: float
    colour: str
    tooltip: str = ""


@dataclass(frozen=True)
class Column:
    """One stacked column of a column chart: its x-axis label, hover text and segments."""

    label: str
    tooltip: str
    segments: tuple[Segment, ...]


def category_colour(category: str) -> str:
    if category in _CATEGORY_COLOURS:
        return _CATEGORY_COLOURS[category]
    digest = hashlib.sha256(category.encode()).digest()
    return _SPARE_COLOURS[digest[0] % len(_SPARE_COLOURS)]


def _num(value: float) -> str:
    """A coordinate with at most 2 decimals and no trailing zeros."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if math.isfinite(value) else "0"


def _fit(text: str, width_px: float, font_px: float) -> str:
    """The text cut (with an ellipsis) to about width_px at font_px."""
    max_chars = max(int(width_px / (font_px * CHAR_WIDTH_PX)), 1)
    return text if len(text) <= max_chars else text[: max(max_chars - 1, 1)] + "\u2026"


def _svg_open(width: float, height: float, label: str, css_class: str) -> str:
    return (f'<svg class="{escape(css_class)}" width="{_num(width)}" '
            f'height="{_num(height)}" viewBox="0 0 {_num(width)} {_num(height)}" role="img" '
            f'aria-label="{escape(label)}" font-family="{escape(FONT)}">')


def _text(x: float, y: float, text: str, *, size: float = 11, colour: str = TEXT_COLOUR,
          anchor: str = "start", weight: str = "normal", baseline: str = "middle", rotate: float = 0) -> str:
    transform = f' transform="rotate({_num(rotate)} {_num(x)} {_num(y)})"' if rotate else ""
    return (f'<text x="{_num(x)}" y="{_num(y)}"{transform} font-size="{_num(size)}" fill="{colour}" '
            f'text-anchor="{anchor}" dominant-baseline="{baseline}" font-weight="{weight}">'
            f"{escape(text)}</text>")


def _rect(x: float, y: float, width: float, height: float, colour: str, tooltip: str = "") -> str:
    title = f"<title>{escape(tooltip)}</title>" if tooltip else ""
    return (f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(max(width, 0.0))}" '
            f'height="{_num(max(height, 0.0))}" fill="{colour}">{title}</rect>')


def stacked_bar(segments: Sequence[Segment], *, width: float = 280, height: float = 18,
                label: str = "stacked bar", show_percent_from: float = 12.0) -> str:
    """One horizontal bar, each segment's length its share of the sum of the values (100 %).

    Segments of at least `show_percent_from` percent carry their share as white text."""
    total = sum(max(s.value, 0.0) for s in segments)
    parts = [_svg_open(width, height, label, "chart stacked-bar")]
    if total <= 0:
        parts.append(_rect(0, 0, width, height, "#eef1f4", "no time recorded"))
    else:
        x = 0.0
        for segment in segments:
            share = max(segment.value, 0.0) / total
            segment_width = share * width
            parts.append(_rect(x, 0, segment_width, height, segment.colour, segment.tooltip or segment.label))
            if share * 100 >= show_percent_from and segment_width > 30:
                parts.append(_text(x + segment_width / 2, height / 2 + 0.5, f"{share * 100:.0f}%", size=10,
                                   colour="#ffffff", anchor="middle", weight="600"))
            x += segment_width
    parts.append("</svg>")
    return "".join(parts)


def value_bar(value: float, maximum: float, *, colour: str, width: float = 140, height: float = 12,
              tooltip: str = "") -> str:
    """A single bar whose length is value / maximum of the width (for table cells)."""
    share = min(max(value / maximum, 0.0), 1.0) if maximum > 0 else 0.0
    return "".join([
        _svg_open(width, height, tooltip or "bar", "chart value-bar"),
        _rect(0, 0, width, height, "#eef1f4"),
        _rect(0, 0, share * width, height, colour, tooltip),
        "</svg>",
    ])


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Round axis ticks from 0 to at least `maximum` (steps of 1, 2, 2.5 or 5 x 10^k)."""
    if not math.isfinite(maximum) or maximum <= 0:
        return [0.0, 1.0]
    raw_step = maximum / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw_step))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw_step)
    steps = math.ceil(maximum / step - 1e-9)
    return [round(i * step, 10) for i in range(steps + 1)]


def _tick_label(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:g}" if abs(value) >= 0.01 else f"{value:.1e}"


def column_chart(columns: Sequence[Column], *, unit: str, width: float = 620, height: float = 250,
                 label: str = "column chart") -> str:
    """Stacked vertical columns (one per x label) on a y axis in `unit` with round ticks."""
    left, right, top, bottom = 56.0, 12.0, 12.0, 46.0
    plot_width, plot_height = width - left - right, height - top - bottom
    totals = [sum(max(s.value, 0.0) for s in c.segments) for c in columns]
    ticks = nice_ticks(max(totals, default=0.0))
    y_max = ticks[-1] or 1.0
    parts = [_svg_open(width, height, label, "chart column-chart")]
    for tick in ticks:
        y = top + plot_height - tick / y_max * plot_height
        parts.append(f'<line x1="{_num(left)}" x2="{_num(width - right)}" y1="{_num(y)}" y2="{_num(y)}" '
                     f'stroke="{GRID_COLOUR}" stroke-width="1"/>')
        parts.append(_text(left - 6, y, _tick_label(tick), size=10, colour=MUTED_COLOUR, anchor="end"))
    parts.append(_text(12, top + plot_height / 2, unit, size=10, colour=MUTED_COLOUR, anchor="middle", rotate=-90))
    if not columns:
        parts.append(_text(left + plot_width / 2, top + plot_height / 2, "no runs", colour=MUTED_COLOUR,
                           anchor="middle"))
    slot = plot_width / max(len(columns), 1)
    bar_width = min(slot * 0.7, 64.0)
    label_every = max(math.ceil(len(columns) * 58 / plot_width), 1)  # ~58 px per readable label
    for index, (column, total) in enumerate(zip(columns, totals, strict=True)):
        x = left + slot * index + (slot - bar_width) / 2
        y = top + plot_height
        group = [f"<g><title>{escape(column.tooltip)}</title>"]
        for segment in column.segments:
            segment_height = max(segment.value, 0.0) / y_max * plot_height
            y -= segment_height
            group.append(_rect(x, y, bar_width, segment_height, segment.colour, segment.tooltip or segment.label))
        group.append("</g>")
        parts.extend(group)
        if total > 0 and bar_width >= 26:
            parts.append(_text(x + bar_width / 2, y - 6, _tick_label(round(total, 3 if total < 10 else 1)),
                               size=9, colour=MUTED_COLOUR, anchor="middle"))
        if index % label_every == 0:
            parts.append(_text(x + bar_width / 2, top + plot_height + 14, _fit(column.label, slot * label_every, 10),
                               size=10, anchor="middle"))
    parts.append(f'<line x1="{_num(left)}" x2="{_num(width - right)}" y1="{_num(top + plot_height)}" '
                 f'y2="{_num(top + plot_height)}" stroke="{MUTED_COLOUR}" stroke-width="1"/>')
    parts.append("</svg>")
    return "".join(parts)


def legend_swatch(colour: str, *, size: float = 10) -> str:
    """A small square of one colour, for HTML legends."""
    return "".join([_svg_open(size, size, "", "swatch"), _rect(0, 0, size, size, colour), "</svg>"])
