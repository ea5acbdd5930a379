"""The what-if replay: re-time a trace's timeline when GPU events get shorter or idle gaps close.

The dependency graph is two marts (models/marts/replay_*_nodes.sql). A GPU event starts at the later
of its stream predecessor's end + stream lag and its launch call's start + launch lag; a host runtime
call starts after the previous one on its thread plus the host work between them (kept), and a
synchronizing call that waited ends no earlier than the GPU work it waited for + its return lag.
Each chain (a stream, a host thread) is a max-plus recurrence x_k = max(x_{k-1} + b_k, r_k), solved
for the whole chain at once as x_k = C_k + cummax(r_j - C_j) with C the prefix sum of b; the host and
GPU chains are solved in turn until the synchronizing calls stop moving. Nothing else is modelled:
cross-stream event waits and collective joins across ranks keep their measured lag to their launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import polars as pl

from tracelake.analyzers import settings

_GPU_QUERY = """
select event_idx, name, device, stream, chain_ordinal, ts_us, dur_us, end_us, launch_call_idx, host_pid,
    coalesce(launch_lag_us, 0.0) as launch_lag_us, coalesce(stream_lag_us, 0.0) as stream_lag_us,
    binding_edge = 'anchored' as anchored, wait_event_idx, coalesce(wait_lag_us, 0.0) as wait_lag_us, step_number
from replay_gpu_nodes where trace_id = ? order by device, stream, chain_ordinal
"""

_HOST_QUERY = """
select event_idx, pid, tid, thread_ordinal, ts_us, coalesce(host_gap_us, 0.0) as host_gap_us, own_us,
    waited_for_gpu, coalesce(wait_lag_us, 0.0) as wait_lag_us
from replay_host_nodes where trace_id = ? order by pid, tid, thread_ordinal
"""

_GAP_QUERY = "select gap_id, kernel_after_event_idx from gpu_idle_gaps where trace_id = ? and kernel_after_event_idx is not null"

_NEVER = -1.0e18  # a ready time that never binds


@dataclass(frozen=True)
class TimelineGraph:
    """One trace's dependency graph, as the replay reads it."""

    gpu: pl.DataFrame
    host: pl.DataFrame
    gap_kernels: dict[int, int]  # gpu_idle_gaps.gap_id -> the GPU event that closed the gap

    @property
    def measured_span_us(self) -> float:
        if self.gpu.is_empty():
            return 0.0
        return float(self.gpu["end_us"].max()) - float(self.gpu["ts_us"].min())  # type: ignore[arg-type]


@dataclass(frozen=True)
class Change:
    """What a what-if makes faster: µs off GPU events (event_idx), µs off idle gaps (gap_id: the host
    work before the launch that closed the gap shrinks by it, so every later launch of that thread
    comes earlier; what the host gap cannot give comes off the event's own launch and stream lags),
    and the share of a GPU event's launch call and the host work before it that goes away with the
    event (a fused kernel's removed kernels take their launches and dispatch with them)."""

    kernel_cuts: Mapping[int, float]
    gap_cuts: Mapping[int, float]
    launch_removals: Mapping[int, float] = field(default_factory=dict)

    def plus(self, other: Change) -> Change:
        removals = {k: min(1.0, v) for k, v in _summed(self.launch_removals, other.launch_removals).items()}
        return Change(_summed(self.kernel_cuts, other.kernel_cuts), _summed(self.gap_cuts, other.gap_cuts), removals)


NO_CHANGE = Change({}, {})


@dataclass(frozen=True)
class Replay:
    """A replayed timeline: each GPU event's start and end, and whether the host/GPU iteration settled."""

    starts: pl.DataFrame  # event_idx, start_us, end_us
    span_us: float
    iterations: int
    converged: bool


def _summed(first: Mapping[int, float], second: Mapping[int, float]) -> dict[int, float]:
    total = dict(first)
    for key, value in second.items():
        total[key] = total.get(key, 0.0) + value
    return total


def load_graph(db: duckdb.DuckDBPyConnection, trace_id: str) -> TimelineGraph:
    gpu = db.execute(_GPU_QUERY, [trace_id]).pl()
    host = db.execute(_HOST_QUERY, [trace_id]).pl()
    gaps = dict(db.execute(_GAP_QUERY, [trace_id]).fetchall())
    return TimelineGraph(gpu=gpu, host=host, gap_kernels={int(g): int(k) for g, k in gaps.items()})


def _cuts_frame(cuts: Mapping[int, float], column: str) -> pl.DataFrame:
    return pl.DataFrame({"event_idx": list(cuts), column: list(cuts.values())},
                        schema={"event_idx": pl.Int64, column: pl.Float64})


def _changed_nodes(graph: TimelineGraph, change: Change) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The GPU nodes with their replayed durations and the lag cuts left to the events that closed a
    gap, and the host calls with their replayed host gaps and own times."""
    closing: dict[int, float] = {}
    for gap_id, us in change.gap_cuts.items():
        kernel = graph.gap_kernels.get(gap_id)
        if kernel is not None:
            closing[kernel] = closing.get(kernel, 0.0) + us
    gpu = (graph.gpu.join(_cuts_frame(change.kernel_cuts, "kernel_cut"), on="event_idx", how="left")
           .join(_cuts_frame(closing, "closing_cut"), on="event_idx", how="left")
           .join(_cuts_frame(change.launch_removals, "removed_share"), on="event_idx", how="left")
           .with_columns(new_dur=(pl.col("dur_us") - pl.col("kernel_cut").fill_null(0.0)).clip(lower_bound=0.0),
                         closing_cut=pl.col("closing_cut").fill_null(0.0),
                         removed_share=pl.col("removed_share").fill_null(0.0)))
    per_call = (gpu.filter(pl.col("launch_call_idx").is_not_null())
                .group_by(pl.col("launch_call_idx").alias("event_idx"))
                .agg(pl.col("closing_cut").sum(), pl.col("removed_share").min()))
    host = (graph.host.join(per_call, on="event_idx", how="left")
            .with_columns(pl.col("closing_cut").fill_null(0.0), pl.col("removed_share").fill_null(0.0))
            .with_columns(host_cut=pl.min_horizontal(pl.col("closing_cut"), pl.col("host_gap_us").clip(lower_bound=0.0)))
            .with_columns(host_gap_us=(pl.col("host_gap_us") - pl.col("host_cut")) * (1.0 - pl.col("removed_share")),
                          own_us=pl.col("own_us") * (1.0 - pl.col("removed_share"))))
    left = host.select(pl.col("event_idx").alias("launch_call_idx"), (pl.col("closing_cut") - pl.col("host_cut")).alias("_left"))
    gpu = (gpu.join(left, on="launch_call_idx", how="left")
           .with_columns(gap_cut=pl.when(pl.col("launch_call_idx").is_null()).then(pl.col("closing_cut"))
                         .otherwise(pl.when(pl.col("closing_cut") > 0).then(pl.col("_left").fill_null(0.0)).otherwise(0.0)))
           .drop("_left"))
    return gpu, host.drop("closing_cut", "removed_share", "host_cut")


def _chain_solve(frame: pl.DataFrame, keys: list[str], step: pl.Expr, ready: pl.Expr, out: str) -> pl.DataFrame:
    """x_k = max(x_{k-1} + step_k, ready_k) per chain (rows already in chain order; the first row's
    step is ignored: its ready time must anchor it)."""
    first = pl.int_range(pl.len()).over(keys) == 0
    offset = pl.when(first).then(0.0).otherwise(step).cum_sum().over(keys)
    return frame.with_columns(_offset=offset).with_columns(
        (pl.col("_offset") + (ready - pl.col("_offset")).cum_max().over(keys)).alias(out)).drop("_offset")


def _solve_gpu(gpu: pl.DataFrame, launch_start: pl.DataFrame, ends: pl.DataFrame) -> pl.DataFrame:
    """GPU starts and ends given the launch calls' replayed starts (event_idx -> start) and the
    previous round's GPU ends (event_idx -> end), for the waits on other streams."""
    frame = (gpu.join(launch_start.rename({"event_idx": "launch_call_idx", "start_us": "launch_us"}),
                      on="launch_call_idx", how="left")
             .join(ends.select(pl.col("event_idx").alias("wait_event_idx"), pl.col("end_us").alias("waited_end_us")),
                   on="wait_event_idx", how="left"))
    ready = (pl.when(pl.col("anchored")).then(pl.col("ts_us") - pl.col("gap_cut"))
             .when(pl.col("launch_us").is_not_null())
             .then(pl.col("launch_us") + pl.col("launch_lag_us") - pl.col("gap_cut"))
             .otherwise(_NEVER))
    # a chain's first event with no launch starts where it was measured (less a closed gap)
    first = pl.int_range(pl.len()).over(["device", "stream"]) == 0
    ready = pl.when(first & pl.col("launch_us").is_null()).then(pl.col("ts_us") - pl.col("gap_cut")).otherwise(ready)
    waited = (pl.col("waited_end_us") + pl.col("wait_lag_us") - pl.col("gap_cut")).fill_null(_NEVER)
    ready = pl.max_horizontal(ready, waited)
    # the step into event k: the previous event's replayed duration plus k's stream lag
    step = (pl.col("new_dur").shift(1).over(["device", "stream"])
            + (pl.col("stream_lag_us") - pl.col("gap_cut")).clip(lower_bound=0.0))
    solved = _chain_solve(frame, ["device", "stream"], step, ready, "start_us")
    return solved.with_columns(end_us=pl.col("start_us") + pl.col("new_dur"))


def _solve_host(host: pl.DataFrame, waits: pl.DataFrame) -> pl.DataFrame:
    """Host call starts given what each synchronizing call waits for (event_idx -> gpu_end_us)."""
    frame = host.join(waits, on="event_idx", how="left")
    wait_ready = pl.when(pl.col("waited_for_gpu") & pl.col("gpu_end_us").is_not_null()).then(
        pl.col("gpu_end_us") + pl.col("wait_lag_us")).otherwise(_NEVER)
    first = pl.int_range(pl.len()).over(["pid", "tid"]) == 0
    # ends: e_k = max(e_{k-1} + gap_k + own_k, wait_k); the first call starts where it was measured
    ready = pl.when(first).then(pl.max_horizontal(pl.col("ts_us") + pl.col("own_us"), wait_ready)).otherwise(wait_ready)
    solved = _chain_solve(frame, ["pid", "tid"], pl.col("host_gap_us") + pl.col("own_us"), ready, "end_us")
    start = pl.when(first).then(pl.col("ts_us")).otherwise(
        pl.col("end_us").shift(1).over(["pid", "tid"]) + pl.col("host_gap_us"))
    return solved.with_columns(start_us=start)


def _waits(gpu_solved: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:  # host: measured launch order
    """For each synchronizing call that waited, the latest replayed end of the GPU work its process
    launched up to it (in measured launch order; a blocking copy call waits for its own copy)."""
    syncs = host.filter(pl.col("waited_for_gpu")).select("event_idx", "pid", "ts_us").sort("ts_us")
    launched = (gpu_solved.filter(pl.col("launch_call_idx").is_not_null())
                .join(host.select(pl.col("event_idx").alias("launch_call_idx"), pl.col("ts_us").alias("launch_ts")),
                      on="launch_call_idx", how="inner")
                .sort("launch_ts")
                .with_columns(gpu_end_us=pl.col("end_us").cum_max().over("host_pid"))
                .select(pl.col("host_pid").alias("pid"), "launch_ts", "gpu_end_us"))
    if syncs.is_empty() or launched.is_empty():
        return pl.DataFrame(schema={"event_idx": pl.Int64, "gpu_end_us": pl.Float64})
    matched = syncs.join_asof(launched, left_on="ts_us", right_on="launch_ts", by="pid",
                              strategy="backward", allow_exact_matches=True, check_sortedness=False)
    return matched.select("event_idx", "gpu_end_us")


def replay(graph: TimelineGraph, change: Change = NO_CHANGE) -> Replay:
    """The timeline with `change` applied: host and GPU chains solved in turn until no
    synchronizing call moves (at most settings.REPLAY_MAX_ITERATIONS rounds)."""
    if graph.gpu.is_empty():
        return Replay(starts=graph.gpu.select("event_idx", "ts_us", "end_us", "step_number").rename({"ts_us": "start_us"}),
                      span_us=0.0, iterations=0, converged=True)
    gpu, host = _changed_nodes(graph, change)
    waits = pl.DataFrame(schema={"event_idx": pl.Int64, "gpu_end_us": pl.Float64})
    solved_gpu = gpu.with_columns(start_us=pl.col("ts_us"), end_us=pl.col("end_us"))
    converged = False
    iterations = 0
    previous = pl.concat([waits["gpu_end_us"], solved_gpu["end_us"]])
    for iterations in range(1, settings.REPLAY_MAX_ITERATIONS + 1):  # noqa: B007 - rounds, not events
        solved_host = _solve_host(host, waits)
        solved_gpu = _solve_gpu(gpu, solved_host.select("event_idx", "start_us"), solved_gpu.select("event_idx", "end_us"))
        waits = _waits(solved_gpu, host)
        current = pl.concat([waits.sort("event_idx")["gpu_end_us"], solved_gpu["end_us"]])
        moved = (previous - current).abs().max() if previous.len() == current.len() else None
        if isinstance(moved, (int, float)) and moved < settings.REPLAY_SETTLED_US:
            converged = True
            break
        previous = current
    starts = solved_gpu.select("event_idx", "start_us", "end_us", "step_number")
    span = (float(starts["end_us"].max()) - float(starts["start_us"].min())) if not starts.is_empty() else 0.0  # type: ignore[arg-type]
    return Replay(starts=starts, span_us=span, iterations=iterations, converged=converged)


def reproduction_error(graph: TimelineGraph) -> tuple[float, float]:
    """An unchanged replay against the measured timeline: (span error µs, largest start error µs)."""
    unchanged = replay(graph)
    measured = graph.gpu.select("event_idx", pl.col("ts_us").alias("measured_us"))
    joined = unchanged.starts.join(measured, on="event_idx")
    worst = float((joined["start_us"] - joined["measured_us"]).abs().max() or 0.0) if not joined.is_empty() else 0.0  # type: ignore[arg-type]
    return unchanged.span_us - graph.measured_span_us, worst


_CRITICAL_PATH_QUERY = """
with first_gpu as (
    -- without steps the analysis window's start: after idle at the profile window's leading edge
    -- (gpu_idle_gaps class window_edge), which E2E leaves out too
    select nodes.step_number, greatest(min(nodes.ts_us), coalesce(max(edges.end_us) filter (
            where nodes.step_number is null and edges.end_us <= (select avg(ts_us) from replay_gpu_nodes where trace_id = ?)),
        0)) as first_gpu_us
    from replay_gpu_nodes as nodes
    left join gpu_idle_gaps as edges on edges.trace_id = nodes.trace_id and edges.gap_class = 'window_edge'
    where nodes.trace_id = ?
    group by nodes.step_number
),
bounds as (
    -- from the step's first GPU event (the trace's, without steps), as the GPU timeline's E2E counts:
    -- host work before it (a data-loading prologue) is the report's idle and host findings' business
    select path.step_number, greatest(min(path.ts_us), any_value(first_gpu.first_gpu_us)) as start_us,
        max(path.end_us) as end_us
    from critical_path as path
    inner join first_gpu on path.step_number is not distinct from first_gpu.step_number
    where path.trace_id = ?
    group by path.step_number
),
parts as (
    select bounds.step_number, bounds.end_us - bounds.start_us as span_us,
        sum(least(path.self_us, path.end_us - bounds.start_us)) filter (where path.node_kind = 'gpu') as gpu_us,
        sum(least(path.self_us, path.end_us - bounds.start_us)) filter (where path.node_kind = 'host') as host_us
    from critical_path as path
    inner join bounds on path.step_number is not distinct from bounds.step_number
    where path.trace_id = ? and path.end_us > bounds.start_us
    group by bounds.step_number, bounds.end_us, bounds.start_us
)
select step_number, span_us, coalesce(gpu_us, 0.0), coalesce(host_us, 0.0)
from parts order by span_us desc, step_number limit 1
"""


@dataclass(frozen=True)
class CriticalPath:
    """The longest step's critical path (the critical_path mart) from the step's first GPU event to
    its last one's end: its span, the GPU work on it and
    the host calls on it (launches, synchronizing calls; µs); the rest is the time between them (the
    host's own work between calls, launch latency, waits for another stream)."""

    step_number: int | None
    span_us: float
    gpu_us: float
    host_us: float


def longest_critical_path(db: duckdb.DuckDBPyConnection, trace_id: str) -> CriticalPath | None:
    row = db.execute(_CRITICAL_PATH_QUERY, [trace_id, trace_id, trace_id, trace_id]).fetchone()
    return None if row is None else CriticalPath(row[0], float(row[1]), float(row[2]), float(row[3]))
