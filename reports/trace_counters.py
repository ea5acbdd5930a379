"""Counter tracks for an exported window (`tracelake export --counters`), as HTA's augmented trace
has them: the memory-copy bandwidth of each copy kind (`memcpy_bandwidth_series`) and the launch
queue of each stream (`stream_queue_lengths`), as Chrome-trace counter events (`"ph": "C"`) on the
GPU process whose events changed them.

A counter event's track is its name and argument key, which Perfetto shows joined ("Memcpy HtoD
bandwidth (GB/s)", "stream 7 queue length") and chrome://tracing as a counter with one series. A
track holds its changes inside the window, one sample per timestamp (the mart's last row there, in
its own order), and a sample at each window edge with the value in force then (0 before its first
change), so the track neither starts mid-air nor runs past the window; a track with no change in
the window and nothing running through it is not written, so a trace without copies has no
bandwidth track."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from tracelake.reports.trace_window_events import trace_id_value

COUNTER_CATEGORY = "tracelake.counter"
BANDWIDTH_SERIES = "bandwidth (GB/s)"  # Perfetto: "<copy kind> bandwidth (GB/s)"
QUEUE_SERIES = "queue length"  # Perfetto: "stream <n> queue length"

COUNTER_SAMPLES_SQL = """
with changes as (
    select
        series.device, series.copy_kind as counter_name, $bandwidth_series as series_name, series.ts_us,
        series.gb_per_s as counter_value,
        row_number() over (partition by series.device, series.copy_kind
                           order by series.ts_us, series.bandwidth_change, series.event_idx) as change_order,
        changed_by.pid
    from memcpy_bandwidth_series as series
    inner join events as changed_by on changed_by.trace_id = series.trace_id and changed_by.event_idx = series.event_idx
    where series.trace_id = $trace_id
    union all
    select
        queue.device, 'stream ' || queue.stream, $queue_series, queue.ts_us, queue.queue_length,
        row_number() over (partition by queue.device, queue.stream
                           order by queue.ts_us, case queue.change_kind when 'launch' then 0 else 1 end, queue.event_idx),
        changed_by.pid
    from stream_queue_lengths as queue
    inner join events as changed_by on changed_by.trace_id = queue.trace_id and changed_by.event_idx = queue.event_idx
    where queue.trace_id = $trace_id
),
tracks as (
    -- one process per device: the pid its GPU events carry
    select device, counter_name, series_name, min(pid) as pid from changes group by all
),
samples as (
    -- one value per timestamp: the last change there
    select device, counter_name, series_name, ts_us, arg_max(counter_value, change_order) as counter_value
    from changes
    group by all
),
edges as (
    select tracks.device, tracks.counter_name, tracks.series_name, tracks.pid, edge.ts_us,
        coalesce((select arg_max(samples.counter_value, samples.ts_us) from samples
                  where samples.device is not distinct from tracks.device and samples.counter_name = tracks.counter_name
                      and samples.series_name = tracks.series_name and samples.ts_us <= edge.ts_us), 0) as counter_value
    from tracks
    cross join (select $start_us as ts_us union all select $end_us) as edge
),
in_window as (
    select tracks.device, tracks.counter_name, tracks.series_name, tracks.pid, samples.ts_us, samples.counter_value
    from samples
    inner join tracks
        on tracks.device is not distinct from samples.device and tracks.counter_name = samples.counter_name
        and tracks.series_name = samples.series_name
    where samples.ts_us > $start_us and samples.ts_us < $end_us
),
written_tracks as (
    select distinct device, counter_name, series_name from in_window
    union
    select device, counter_name, series_name from edges where counter_value <> 0
)
select track_samples.pid, track_samples.counter_name, track_samples.series_name, track_samples.ts_us,
    track_samples.counter_value
from (select * from in_window union all select * from edges) as track_samples
inner join written_tracks
    on written_tracks.device is not distinct from track_samples.device
    and written_tracks.counter_name = track_samples.counter_name
    and written_tracks.series_name = track_samples.series_name
order by track_samples.device, track_samples.series_name, track_samples.counter_name, track_samples.ts_us
"""


def counter_events(con: duckdb.DuckDBPyConnection, trace_id: str, start_us: float, end_us: float) -> list[dict[str, Any]]:
    """The counter events of the trace's bandwidth and queue tracks in [start_us, end_us]."""
    rows = con.execute(COUNTER_SAMPLES_SQL, {
        "trace_id": trace_id, "start_us": start_us, "end_us": end_us,
        "bandwidth_series": BANDWIDTH_SERIES, "queue_series": QUEUE_SERIES}).fetchall()
    return [{"ph": "C", "cat": COUNTER_CATEGORY, "name": name, "pid": trace_id_value(pid), "ts": ts_us,
             "args": {series: int(value) if series == QUEUE_SERIES else value}}
            for pid, name, series, ts_us, value in rows]


def counter_summary(events: list[dict[str, Any]]) -> str:
    """`, N counter tracks` for the export's line (none: an empty string)."""
    tracks = {(json.dumps(e["pid"]), e["name"], next(iter(e["args"]))) for e in events}
    return f", {len(tracks)} counter tracks" if tracks else ""
