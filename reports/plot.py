"""perf_improvement.png: what the ranked findings could recover, next to where the GPU time goes.

Top panel: one horizontal bar per ranked finding with an impact estimate (the mid estimate of
recoverable time in ms, error bar from the low to the high estimate), P1 at the top.
Bottom panel: the E2E time split into computation / exposed communication / exposed memcpy / idle
(gpu_timeline), one stacked bar. Drawn with matplotlib's Agg canvas, no pyplot global state, so it
is safe in threads. Finding titles carry trace names: they are drawn as plain text (no mathtext, so
`$` and `\\` show as themselves), on one line, without control characters.
"""

from __future__ import annotations

import io
import math
import textwrap

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from tracelake.analyzers.contracts import PriorityData, RankedFinding
from tracelake.core.markdown_text import one_line
from tracelake.core.text_format import clip

MAX_BARS = 10
LABEL_CHARS = 60  # a finding's label on the y axis
_TIER_COLOURS = {"compute": "#3274a1", "system": "#e1812c", "fusion": "#3a923a"}
_BREAKDOWN = (  # (label, ms key, percent key, colour)
    ("Computation", "computation_time_ms", "computation_time_percent", "#3274a1"),
    ("Exposed communication", "exposed_comm_time_ms", "exposed_comm_time_percent", "#c03d3e"),
    ("Exposed memcpy", "exposed_memcpy_time_ms", "exposed_memcpy_time_percent", "#9372b2"),
    ("Idle", "idle_time_ms", "idle_time_percent", "#b0b0b0"),
)


def _number(value: object) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _breakdown_ms(gpu: dict) -> list[tuple[str, float, float, str]]:
    """(label, ms, % of E2E, colour) per segment; ms from the ms key, else percent x total."""
    total = _number(gpu.get("total_time_ms"))
    segments = []
    for label, ms_key, pct_key, colour in _BREAKDOWN:
        ms = _number(gpu.get(ms_key)) if ms_key in gpu else _number(gpu.get(pct_key)) * total / 100.0
        pct = _number(gpu.get(pct_key)) if pct_key in gpu else (100.0 * ms / total if total else 0.0)
        segments.append((label, max(ms, 0.0), max(pct, 0.0), colour))
    return segments


def _kind(finding: RankedFinding) -> str:
    return "fusion" if finding.agent == "kernel_fusion" or finding.category == "kernel_fusion" else finding.tier


def _recoverable(finding: RankedFinding, e2e_ms: float) -> tuple[float, float, float]:
    """(low, mid, high) recoverable ms of one finding."""
    def ms(percent: float | None) -> float:
        return _number(percent) * e2e_ms / 100.0
    mid = _number(finding.recoverable_ms) if finding.recoverable_ms is not None else ms(finding.impact_score)
    low = ms(finding.impact_low) if finding.impact_low is not None else mid
    high = ms(finding.impact_high) if finding.impact_high is not None else mid
    return min(low, mid), mid, max(high, mid)


def _label(finding: RankedFinding) -> str:
    label = f"P{finding.global_rank}: {one_line(finding.title)}"
    shortened = textwrap.shorten(label, width=LABEL_CHARS, placeholder="...")
    # a name longer than the label is cut, not dropped whole
    return shortened if len(shortened) > LABEL_CHARS // 2 or len(label) <= LABEL_CHARS \
        else clip(label, LABEL_CHARS)


def perf_improvement_png(priority: PriorityData, gpu_utilization: dict) -> bytes:
    """The report's plot as PNG bytes (also for zero findings and an empty timeline)."""
    e2e_ms = _number(gpu_utilization.get("total_time_ms")) or _number(priority.e2e_time_ms)
    ranked = sorted((f for f in priority.findings if f.impact_score is not None), key=lambda f: f.global_rank)
    shown = ranked[:MAX_BARS]

    bar_rows = max(len(shown), 1)
    figure = Figure(figsize=(11, 2.6 + 0.42 * bar_rows), dpi=120, facecolor="white")
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(2, 1, height_ratios=[max(1.6, 0.42 * bar_rows), 1.0], hspace=0.65)
    top = figure.add_subplot(grid[0])
    bottom = figure.add_subplot(grid[1])

    # -- recoverable time per finding ------------------------------------------------------------
    top.set_title("Estimated recoverable GPU time per finding (mid estimate, low-high range)",
                  fontsize=11, fontweight="bold", loc="left")
    if shown:
        values = [_recoverable(f, e2e_ms) for f in shown]
        positions = list(range(len(shown)))[::-1]  # P1 at the top
        mids = [v[1] for v in values]
        errors = [[v[1] - v[0] for v in values], [v[2] - v[1] for v in values]]
        colours = [_TIER_COLOURS.get(_kind(f), "#777777") for f in shown]
        top.barh(positions, mids, xerr=errors, color=colours, edgecolor="white", height=0.65,
                 error_kw={"ecolor": "#333333", "capsize": 3, "elinewidth": 1})
        top.set_yticks(positions, [_label(f) for f in shown], fontsize=9, parse_math=False)
        top.set_xlabel("recoverable time (ms)", fontsize=9)
        widest = max(v[2] for v in values) or 1.0
        top.set_xlim(0, widest * 1.3)
        for position, (_low, mid, high), finding in zip(positions, values, shown, strict=True):
            share = _number(finding.impact_score)
            top.text(high + widest * 0.02, position, f"{mid:.3f} ms ({share:.1f}% of E2E)",
                     va="center", fontsize=8, color="#333333")
        kinds = sorted({_kind(f) for f in shown})
        handles = [Patch(color=_TIER_COLOURS.get(k, "#777777"), label=f"{k} finding") for k in kinds]
        top.legend(handles=handles, fontsize=8, loc="best", frameon=False)
        if len(ranked) > len(shown):
            top.text(1.0, -0.22, f"{len(ranked) - len(shown)} more finding(s) not shown",
                     transform=top.transAxes, ha="right", fontsize=8, color="#555555")
    else:
        top.set_yticks([])
        top.set_xticks([])
        top.text(0.5, 0.5, "No quantified optimization opportunities were found", ha="center", va="center",
                 fontsize=10, color="#555555", transform=top.transAxes)
        for side in ("left", "bottom"):
            top.spines[side].set_visible(False)
    for side in ("top", "right"):
        top.spines[side].set_visible(False)

    # -- time breakdown ------------------------------------------------------------------------------
    bottom.set_title(f"GPU time breakdown (E2E {e2e_ms:.3f} ms)", fontsize=11, fontweight="bold", loc="left")
    left = 0.0
    for label, ms, pct, colour in _breakdown_ms(gpu_utilization):
        bottom.barh([0], [ms], left=left, color=colour, edgecolor="white", height=0.6,
                    label=f"{label}: {ms:.3f} ms ({pct:.1f}%)")
        if e2e_ms and ms / e2e_ms >= 0.08:
            bottom.text(left + ms / 2, 0, f"{pct:.1f}%", ha="center", va="center", fontsize=9, color="white",
                        fontweight="bold")
        left += ms
    bottom.set_xlim(0, max(e2e_ms, left) or 1.0)
    bottom.set_ylim(-0.6, 0.6)
    bottom.set_yticks([])
    bottom.set_xlabel("GPU time (ms)", fontsize=9)
    for side in ("top", "right", "left"):
        bottom.spines[side].set_visible(False)
    bottom.legend(loc="upper center", bbox_to_anchor=(0.5, -0.75), ncol=4, fontsize=8, frameon=False)

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", facecolor="white", metadata={"Software": None})
    return buffer.getvalue()
