"""One trace's HTA-style analyses from the warehouse (docs/hta_parity.md): each call reads one mart
for one trace and returns a `TraceFrame`, the polars frame with the SQL that made it and, where a
person would rather look, `.plot()` (a matplotlib Figure, drawn without pyplot's global state).

    wh = tracelake.open()
    wh.queue_length("sampled_rank-0.json.gz").plot()      # launch queue per stream over time
    wh.idle_breakdown(trace).frame                         # host / kernel / other wait per stream
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from tracelake.core.errors import WarehouseError

if TYPE_CHECKING:
    import polars
    from matplotlib.figure import Figure

    from tracelake.api import WarehouseHandle

PlotKind = Literal["step", "bar", "stacked_bar", "barh", "scatter"]
MAX_BARS = 20  # bars a horizontal bar chart shows: the top of the frame's order
LABEL_CHARS = 72  # a bar's label (kernel sequences are long)
FIGURE_SIZE = (10.0, 5.0)  # inches
SEQUENCE_SEPARATOR = " -> "  # between the kernel names of kernel_sequences.sequence


class PlotSpec(BaseModel):
    """How a frame is drawn: x against y, one line or bar group per value of `series`."""

    model_config = ConfigDict(frozen=True)

    kind: PlotKind
    x: str
    y: str
    series: str | None = None
    title: str
    x_label: str
    y_label: str


class TraceFrame:
    """A mart's rows for one trace: `.frame` (polars), `.sql` (the query, to run in `tracelake sql`
    with the trace id in place of $trace) and `.plot()`."""

    def __init__(self, frame: polars.DataFrame, sql: str, trace_id: str, spec: PlotSpec | None) -> None:
        self.frame = frame
        self.sql = sql
        self.trace_id = trace_id
        self.spec = spec

    def __repr__(self) -> str:
        return repr(self.frame)

    def _repr_html_(self) -> str:
        return str(self.frame._repr_html_())

    def plot(self) -> Figure:
        """The frame as a matplotlib Figure (`fig.savefig(path)`; a notebook shows it inline)."""
        from matplotlib.figure import Figure  # noqa: PLC0415

        if self.spec is None:
            raise WarehouseError("this frame has no plot; read .frame")
        spec = self.spec
        figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
        axes = figure.add_subplot()
        draw = {"step": _draw_steps, "bar": _draw_bars, "stacked_bar": _draw_stacked_bars,
                "barh": _draw_horizontal_bars, "scatter": _draw_scatter}[spec.kind]
        draw(axes, self.frame, spec)
        axes.set_title(f"{spec.title} ({self.trace_id[:12]})")
        axes.set_xlabel(spec.x_label)
        axes.set_ylabel(spec.y_label)
        if spec.series is not None and self.frame.height:
            axes.legend(title=spec.series, fontsize="small")
        return figure


def _label(value: object) -> str:
    """A stream id read as a float (7.0) shows as 7."""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _groups(frame: polars.DataFrame, spec: PlotSpec) -> list[tuple[str, polars.DataFrame]]:
    if spec.series is None:
        return [("", frame)]
    return [(_label(key[0]), part) for key, part in frame.group_by(spec.series, maintain_order=True)]


def _draw_steps(axes: Any, frame: polars.DataFrame, spec: PlotSpec) -> None:
    start = frame[spec.x].min() if frame.height else 0.0
    for label, part in _groups(frame, spec):
        since_start_ms = [(x - start) / 1000 for x in part[spec.x].to_list()]
        axes.step(since_start_ms, part[spec.y].to_list(), where="post", label=label)


def _draw_scatter(axes: Any, frame: polars.DataFrame, spec: PlotSpec) -> None:
    for label, part in _groups(frame, spec):
        axes.scatter(part[spec.x].to_list(), part[spec.y].to_list(), s=6, label=label)


def _draw_bars(axes: Any, frame: polars.DataFrame, spec: PlotSpec) -> None:
    axes.bar([_label(x) for x in frame[spec.x].to_list()], frame[spec.y].to_list())


def _draw_stacked_bars(axes: Any, frame: polars.DataFrame, spec: PlotSpec) -> None:
    import polars as pl  # noqa: PLC0415

    assert spec.series is not None
    wide = frame.pivot(on=spec.series, index=spec.x, values=spec.y, aggregate_function="sum").fill_null(0.0)
    labels = [_label(x) for x in wide[spec.x].to_list()]
    bottom = [0.0] * wide.height
    for column in (c for c in wide.columns if c != spec.x):
        values = wide[column].cast(pl.Float64).to_list()
        axes.bar(labels, values, bottom=bottom, label=column)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]


def _draw_horizontal_bars(axes: Any, frame: polars.DataFrame, spec: PlotSpec) -> None:
    top = frame.head(MAX_BARS)
    positions = list(range(top.height))[::-1]  # the frame's first row at the top
    # positions, not labels, place the bars: two clipped labels can read the same
    axes.barh(positions, top[spec.y].to_list())
    axes.set_yticks(positions, [_clip(str(label)) for label in top[spec.x].to_list()])
    axes.tick_params(axis="y", labelsize="x-small")


def _clip(text: str) -> str:
    """A label of LABEL_CHARS at most; a kernel sequence (`a -> b -> c`) keeps a part of each name."""
    parts = text.split(SEQUENCE_SEPARATOR)
    room = max(LABEL_CHARS // len(parts) - len(SEQUENCE_SEPARATOR), 8)
    return SEQUENCE_SEPARATOR.join(part if len(part) <= room else part[: room - 1] + "…" for part in parts)


def one_trace(wh: WarehouseHandle, trace: str) -> str:
    """The one trace id a selector names; none or several is an error saying which."""
    trace_ids = wh.trace_ids(trace)
    if len(trace_ids) != 1:
        raise WarehouseError(f"{trace!r} names {len(trace_ids)} traces; these calls read one trace "
                             "(a trace id, an ingested file or a tag selector matching one)")
    return trace_ids[0]


def read_mart(wh: WarehouseHandle, trace: str, mart: str, order: str, spec: PlotSpec | None) -> TraceFrame:
    if mart not in wh.tables():
        raise WarehouseError(f"warehouse {wh.path} has no {mart} model yet; run `tracelake build --warehouse "
                             f"{wh.path}` to bring it up to date")
    trace_id = one_trace(wh, trace)
    sql = f"select * from {mart} where trace_id = $trace order by {order}"
    return TraceFrame(wh.sql(sql, {"trace": trace_id}).pl(), sql, trace_id, spec)


QUEUE_LENGTH = PlotSpec(kind="step", x="ts_us", y="queue_length", series="stream", title="Launch queue length",
                        x_label="since the first change (ms)", y_label="ops launched, not started")
QUEUE_SUMMARY = PlotSpec(kind="bar", x="stream", y="time_weighted_queue_length", title="Mean launch queue length",
                         x_label="stream", y_label="ops queued (time-weighted mean)")
MEMORY_BANDWIDTH = PlotSpec(kind="step", x="ts_us", y="gb_per_s", series="copy_kind", title="Memory-copy bandwidth",
                            x_label="since the first copy (ms)", y_label="GB/s")
MEMORY_BANDWIDTH_SUMMARY = PlotSpec(kind="bar", x="copy_kind", y="active_mean_gb_per_s",
                                    title="Memory-copy bandwidth while copying", x_label="copy kind",
                                    y_label="GB/s (time-weighted)")
LAUNCH_STATS = PlotSpec(kind="scatter", x="cpu_duration_us", y="gpu_duration_us", series="category",
                        title="Launch call vs GPU duration", x_label="launch call on the host (µs)",
                        y_label="op on the GPU (µs)")
IDLE_BREAKDOWN = PlotSpec(kind="stacked_bar", x="stream", y="idle_us", series="idle_category",
                          title="Idle time per stream", x_label="stream", y_label="idle (µs)")
ANNOTATIONS = PlotSpec(kind="barh", x="name", y="total_us", title="GPU user annotations", x_label="GPU time (µs)",
                       y_label="annotation")
SEQUENCES = PlotSpec(kind="barh", x="sequence", y="total_gpu_time_us", title="Frequent kernel sequences",
                     x_label="GPU time (µs)", y_label="sequence")
