"""`tracelake export --counters`: HTA's memory-bandwidth and queue-length counter tracks in an exported
window, their values the marts' (`memcpy_bandwidth_series`, `stream_queue_lengths`), on HTA's own
sampled rank (copies of four kinds, five streams) and a ROCm torch.compile trace with no copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import HTA_TRACES, TRACES, run_cli
from tracelake.lakehouse import open_warehouse

HTA_RANK = HTA_TRACES / "sampled_rank-0.json.gz"  # HTA's trace_filter rank 0: 40 memcpy, 10 memset, 1154 kernels
NO_COPIES = TRACES / "torch_compile_triton" / "trace.json.gz"  # 12 kernels, no memcpy or memset

# the mart rows of one track in the open window, one per timestamp (the last change there, in the mart's order)
MART_SAMPLES_SQL = """
select counter_name, ts_us, arg_max(counter_value, change_order) as counter_value
from (
    select copy_kind as counter_name, ts_us, gb_per_s as counter_value,
        row_number() over (partition by copy_kind order by ts_us, bandwidth_change, event_idx) as change_order
    from memcpy_bandwidth_series where trace_id = $t
    union all
    select 'stream ' || stream, ts_us, queue_length,
        row_number() over (partition by stream order by ts_us, change_kind = 'start', event_idx)
    from stream_queue_lengths where trace_id = $t
)
where ts_us > $start and ts_us < $end
group by all
"""


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("counters") / "wh"
    result = run_cli("ingest", str(HTA_RANK), str(NO_COPIES), "--warehouse", str(root), "--quiet")
    assert result.returncode == 0, result.stderr
    with open_warehouse(root).connect_read_only() as con:
        ids = dict(con.execute("select file_name, trace_id from traces").fetchall())
    return root, ids


def _export(warehouse: Path, trace_id: str, out: Path, *options: str) -> list[dict]:
    result = run_cli("export", trace_id, *options, "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return json.loads(out.read_text())["traceEvents"]


def test_counter_tracks_hold_the_marts_values_in_the_window(warehouse: tuple[Path, dict[str, str]],
                                                            tmp_path: Path) -> None:
    root, ids = warehouse
    trace_id = ids[HTA_RANK.name]
    with open_warehouse(root).connect_read_only() as con:
        # the middle of the trace's copies: a window that cuts through tracks on both edges
        start, end, base = con.execute("""
            select quantile_disc(ts_us, 0.25), quantile_disc(ts_us, 0.75), any_value(traces.ts_base_us)
            from memcpy_bandwidth_series join traces using (trace_id) where trace_id = ?""", [trace_id]).fetchone()
        start, end = start + 0.5, end + 0.5  # edges between changes, so each edge sample is the value in force
        expected = con.execute(MART_SAMPLES_SQL, {"t": trace_id, "start": start, "end": end}).fetchall()
        at_start = dict(con.execute("""
            select copy_kind, arg_max(gb_per_s, (ts_us, bandwidth_change, event_idx)) from memcpy_bandwidth_series
            where trace_id = ? and ts_us <= ? group by 1""", [trace_id, start]).fetchall())
    events = _export(root, trace_id, tmp_path / "w.json", "--counters", "--window", f"{start + base}:{end + base}")
    counters = [e for e in events if e["ph"] == "C"]
    inside = sorted((e["name"], e["ts"], next(iter(e["args"].values()))) for e in counters if start < e["ts"] < end)
    assert inside == sorted(expected) and len(inside) > 100
    names = {(e["name"], next(iter(e["args"]))) for e in counters}
    assert ("Memcpy DtoD", "bandwidth (GB/s)") in names and ("stream 7", "queue length") in names
    assert all(e["pid"] == 0 for e in counters)  # the GPU process of device 0, as the rank's kernels
    edges = {e["name"]: e["args"]["bandwidth (GB/s)"] for e in counters if e["ts"] == start and "bandwidth (GB/s)" in e["args"]}
    assert edges and all(value == pytest.approx(at_start.get(kind, 0.0)) for kind, value in edges.items())
    assert all(start <= e["ts"] <= end for e in counters)
    # each track opens and closes on the window's edges
    for name in {e["name"] for e in counters}:
        times = [e["ts"] for e in counters if e["name"] == name]
        assert min(times) == start and max(times) == end, name


def test_an_export_with_counters_ingests_back(warehouse: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, ids = warehouse
    out = tmp_path / "whole.json"
    events = _export(root, ids[HTA_RANK.name], out, "--counters")
    counters = sum(e["ph"] == "C" for e in events)
    again = run_cli("ingest", str(out), "--warehouse", str(tmp_path / "wh2"), "--quiet")
    assert again.returncode == 0, again.stderr
    with open_warehouse(tmp_path / "wh2").connect_read_only() as con:
        stored = con.execute("select count(*) filter (where phase = 'C'), count(*) filter (where category = 'kernel') "
                             "from events").fetchone()
        kernels = con.execute("select count(*) from kernels").fetchone()[0]
    assert stored == (counters, sum(e.get("cat") == "kernel" for e in events)) and counters > 2000
    assert kernels >= stored[1] > 1000  # the counters are stored as events, never read as GPU work


def test_a_trace_without_copies_writes_no_bandwidth_track(warehouse: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, ids = warehouse
    counters = [e for e in _export(root, ids[NO_COPIES.name], tmp_path / "t.json", "--counters") if e["ph"] == "C"]
    assert not [e for e in counters if "bandwidth (GB/s)" in e["args"]]
    assert {e["name"] for e in counters} and all("queue length" in e["args"] for e in counters)
    assert max(e["args"]["queue length"] for e in counters) >= 1


def test_counters_are_written_only_when_asked(warehouse: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, ids = warehouse
    assert not [e for e in _export(root, ids[HTA_RANK.name], tmp_path / "plain.json") if e["ph"] == "C"]


def test_a_job_export_refuses_counters_in_one_line(warehouse: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root, _ = warehouse
    result = run_cli("export", "job:trace_filter", "--counters", "--out", str(tmp_path / "j.json"), "--warehouse", str(root))
    assert result.returncode == 2 and "--counters" in result.stderr and "Traceback" not in result.stderr
