"""GPU and host work written in ways the typed decode does not read directly.

Two things a trace can do that would otherwise lose work without a word:

- Duration events as `B`/`E` pairs instead of one `X` event. `pair_begin_end` matches them per
  (pid, tid) as a stack (an `E` closes the latest open `B` of its thread), vectorised: the clamped
  running depth of each thread gives every `B` and `E` its level, and within a level the events
  alternate B, E, B, E. The decode then reads each matched `B` as a complete event lasting to its
  `E`; unmatched ones are kept as written and counted.
- Events that look like device work but are in no category TraceLake reads (a category spelled
  like a GPU one, or args naming a device, stream or correlation). `unrecognized_device_mask` finds
  them, so ingest counts them by spelling for the `unrecognized_device_events` check instead of
  letting a GPU trace pass for a CPU-only one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Categories (as decode normalises them) that are read, or known to be something other than device
# work: host events, annotations, flows, and the device-side markers that are waits, not work
# (Kineto's cuda_sync / cuda_event rows, gpu_user_annotation ranges over kernels already counted).
KNOWN_NON_DEVICE_WORK_CATEGORIES = (
    "cpu_op", "cuda_runtime", "cuda_driver", "python_function", "user_annotation", "gpu_user_annotation",
    "cpu_instant_event", "trace", "overhead", "ac2g", "async_cpu_to_gpu", "fwdbwd", "cuda_sync", "cuda_event",
)
# Words of a category that name device work (Kineto's activity type names: kernel, cuda_*, mtia_*,
# hip for ROCm tools, xpu / hpu / npu for other accelerators, cupti for its profiler ranges).
DEVICE_CATEGORY_WORDS = re.compile(r"(?i)gpu|kernel|cuda|hip|mtia|xpu|hpu|npu|cupti|device|memcpy|memset")
# JSON keys of `args` that only device events carry in Kineto traces.
DEVICE_ARG_KEYS = ('"device"', '"stream"', '"correlation"')
BEGIN_END_PHASES = ("B", "E")

BEGIN_END_SCHEMA = pa.schema(
    [("event_idx", pa.int64()), ("ph", pa.string()), ("pid", pa.string()), ("tid", pa.string()), ("ts", pa.float64())]
)


@dataclass(frozen=True)
class BeginEndPairs:
    """Matched `B`/`E` events of a trace: each begin's event_idx and duration, the ends they used."""

    begin_idx: pa.Array  # int64, sorted
    dur: pa.Array  # float64, µs, one per begin
    end_idx: pa.Array  # int64: the matched `E` events, read as part of their `B`
    unmatched: int  # `B` never closed plus `E` closing nothing


def pair_begin_end(rows: pa.Table) -> BeginEndPairs:
    """Match `rows` (BEGIN_END_SCHEMA: every usable B and E event of the trace) per (pid, tid)."""
    if rows.num_rows == 0:
        empty = pa.array([], pa.int64())
        return BeginEndPairs(empty, pa.array([], pa.float64()), empty, 0)
    # a thread's events in time order; file order breaks ties (an E written before a B at one ts closes first)
    rows = rows.sort_by([("pid", "ascending"), ("tid", "ascending"), ("ts", "ascending"), ("event_idx", "ascending")])
    thread_key = pc.binary_join_element_wise(
        pc.fill_null(rows["pid"], ""), pc.fill_null(rows["tid"], ""), "\x00").combine_chunks()
    begin = pc.equal(rows["ph"], "B").to_numpy(zero_copy_only=False)
    step = np.where(begin, 1, -1).astype(np.int64)
    new_thread = np.ones(len(step), dtype=bool)
    new_thread[1:] = pc.not_equal(thread_key.slice(1), thread_key.slice(0, len(step) - 1)).to_numpy(zero_copy_only=False)
    thread = segment = np.cumsum(new_thread) - 1
    # per-thread running depth, clamped at 0: an E that would take it below 0 closes nothing
    total = np.cumsum(step)
    walk = total - (total - step)[np.flatnonzero(new_thread)][segment]
    low = np.minimum(_segmented_running_min(walk, segment), 0)
    low_before = np.zeros_like(low)
    low_before[1:] = np.where(new_thread[1:], 0, low[:-1])
    orphan_end = ~begin & (walk < low_before)
    depth = walk - low
    level = np.where(begin, depth, depth + 1)
    usable = ~orphan_end
    order = np.lexsort((np.arange(len(step)), level, thread))
    order = order[usable[order]]
    ph_sorted, thread_sorted, level_sorted = begin[order], thread[order], level[order]
    # within one (thread, level) the events alternate B, E: a B followed by an E of its run is a pair
    same_run = (thread_sorted[1:] == thread_sorted[:-1]) & (level_sorted[1:] == level_sorted[:-1])
    paired = ph_sorted[:-1] & ~ph_sorted[1:] & same_run
    begins, ends = order[:-1][paired], order[1:][paired]
    idx = rows["event_idx"].to_numpy(zero_copy_only=False)
    ts = rows["ts"].to_numpy(zero_copy_only=False)
    by_begin = np.argsort(idx[begins], kind="stable")
    begins, ends = begins[by_begin], ends[by_begin]
    return BeginEndPairs(
        begin_idx=pa.array(idx[begins], pa.int64()),
        dur=pa.array(ts[ends] - ts[begins], pa.float64()),
        end_idx=pa.array(np.sort(idx[ends]), pa.int64()),
        unmatched=int(len(step) - 2 * len(begins)),
    )


def _segmented_running_min(values: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """np.minimum.accumulate restarted at each new `segment` (non-decreasing ids): each segment is
    lifted below every earlier one, so one accumulate never carries a minimum across segments."""
    gap = 2 * int(np.abs(values).max()) + 1
    return np.minimum.accumulate(values - segment * gap) + segment * gap


def unrecognized_device_mask(categories: pa.Array, args: pa.Array, complete: np.ndarray,
                             read: np.ndarray) -> np.ndarray:
    """Complete events not `read` as host or GPU work whose category is not known to be something
    else and that look like device work: a device word in the category, or device args. Only those
    few rows' text is searched (scanning every event's args would cost the decode ~10 %)."""
    candidate = complete & ~read
    rows = np.flatnonzero(candidate)
    if rows.size == 0:
        return candidate
    taken = pa.array(rows, pa.int64())
    cats = pc.take(categories, taken)
    unknown = ~pc.fill_null(pc.is_in(pc.utf8_lower(cats), value_set=pa.array(KNOWN_NON_DEVICE_WORK_CATEGORIES)),
                            False).to_numpy(zero_copy_only=False)
    rows, taken = rows[unknown], pa.array(rows[unknown], pa.int64())
    if rows.size == 0:
        return np.zeros_like(candidate)
    cats, texts = pc.take(categories, taken), pc.take(args, taken)
    device_like = pc.fill_null(pc.match_substring_regex(cats, DEVICE_CATEGORY_WORDS.pattern), False).to_numpy(
        zero_copy_only=False).copy()
    for key in DEVICE_ARG_KEYS:
        device_like |= pc.fill_null(pc.match_substring(texts, key), False).to_numpy(zero_copy_only=False)
    mask = np.zeros_like(candidate)
    mask[rows[device_like]] = True
    return mask


def read_pairs(base: pa.Table, pairs: BeginEndPairs) -> tuple[pa.Table, pa.Array]:
    """`base` (a decoded chunk) with each matched B turned into a complete event (ph X, its pair's
    duration), and the mask of the matched E events, which that event now covers."""
    position = pc.index_in(base["event_idx"], value_set=pairs.begin_idx)
    opened = pc.is_valid(position)
    base = base.set_column(base.schema.get_field_index("ph"), "ph", pc.if_else(opened, "X", base["ph"]))
    base = base.set_column(base.schema.get_field_index("dur"), "dur",
                           pc.if_else(opened, pc.take(pairs.dur, position), base["dur"]))
    return base, pc.is_in(base["event_idx"], value_set=pairs.end_idx)
