"""Timestamps on an absolute clock are kept exactly.

A 2023-style trace writes `ts` as epoch µs (~1.7e15), where float64 keeps only 0.25 µs steps. The
test writes the real BERT-small H100 trace of tests/data with 1.7e15 µs added to every `ts` (decimal
text arithmetic, every nanosecond kept) and checks that the warehouse gives the same GPU timeline to
the nanosecond, that each kernel keeps its exact start, and that `tracelake export` writes the trace's
clock back exactly (its base as Kineto's `baseTimeNanoseconds`, the events relative to it).
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES, run_cli
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

SOURCE = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
EPOCH_US = Decimal(1_700_000_000_000_000)
TIMELINE = ("computation_time_ms", "exposed_comm_time_ms", "exposed_memcpy_time_ms", "busy_time_ms",
            "idle_time_ms", "total_time_ms")
NS_IN_MS = 1e-6


def _shifted(target: Path, as_strings: bool = False) -> None:
    """The source with EPOCH_US added to every ts, computed and written as exact decimal text (as JSON
    strings with `as_strings`, as some tools write them)."""
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    for event in trace["traceEvents"]:
        if isinstance(event.get("ts"), (int, float)):
            event["ts"] = f"@exact@{Decimal(repr(event['ts'])) + EPOCH_US}@exact@"
    text = re.sub(r'"@exact@([0-9.]+)@exact@"', r'"\1"' if as_strings else r"\1", json.dumps(trace))
    target.write_bytes(gzip.compress(text.encode(), mtime=0))


@pytest.fixture(scope="module")
def shifted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, Path, Path]:
    folder = tmp_path_factory.mktemp("absolute_clock")
    original, absolute = folder / "original.json.gz", folder / "absolute.json.gz"
    original.write_bytes(SOURCE.read_bytes())
    _shifted(absolute)
    _shifted(folder / "absolute_strings.json.gz", as_strings=True)
    wh = Warehouse(tmp_path_factory.mktemp("absolute_clock_warehouse"))
    report = ingest_paths([original, absolute, folder / "absolute_strings.json.gz"], wh, tags={"suite": "exact-ts"},
                          jobs=2)
    assert not report.failed, report.failed
    return wh, original, absolute


def _one(wh: Warehouse, sql: str, path: Path) -> tuple[Any, ...]:
    with wh.connect_read_only() as con:
        row = con.execute(sql, [str(path.resolve())]).fetchone()
    assert row is not None
    return tuple(row)


def test_absolute_clock_gives_the_same_timeline_to_the_ns(shifted: tuple[Warehouse, Path, Path]) -> None:
    wh, original, absolute = shifted
    sql = f"select {', '.join(TIMELINE)} from gpu_timeline join traces using (trace_id) where source_path = ?"
    expected, got = _one(wh, sql, original), _one(wh, sql, absolute)
    assert expected[TIMELINE.index("busy_time_ms")] > 0
    assert got == pytest.approx(expected, abs=NS_IN_MS)
    all_events = "select busy_time_ms from gpu_timeline_all_events join traces using (trace_id) where source_path = ?"
    assert _one(wh, all_events, absolute)[0] == pytest.approx(_one(wh, all_events, original)[0], abs=NS_IN_MS)
    # the same with every ts written as a JSON string
    assert _one(wh, sql, absolute.with_name("absolute_strings.json.gz")) == pytest.approx(expected, abs=NS_IN_MS)


def test_each_kernel_keeps_its_exact_start(shifted: tuple[Warehouse, Path, Path]) -> None:
    wh, original, absolute = shifted
    base = _one(wh, "select ts_base_us from traces where source_path = ?", absolute)[0]
    assert base > 0 and base % 1_000_000 == 0  # a whole second before the trace
    assert _one(wh, "select ts_base_us from traces where source_path = ?", original)[0] == 0
    sql = ("select list(ts_us order by event_idx) from kernels join traces using (trace_id) where source_path = ?")
    starts, shifted_starts = _one(wh, sql, original)[0], _one(wh, sql, absolute)[0]
    assert len(starts) == len(shifted_starts) > 0
    offset = float(EPOCH_US - base)  # the shift the stored clock keeps: exact in float64 (an integer)
    assert max(abs(s + offset - t) for s, t in zip(starts, shifted_starts, strict=True)) < 1e-3  # under a nanosecond


def test_export_writes_the_absolute_clock_back_exactly(shifted: tuple[Warehouse, Path, Path], tmp_path: Path) -> None:
    wh, _, absolute = shifted
    trace_id = _one(wh, "select trace_id from traces where source_path = ?", absolute)[0]
    out = tmp_path / "whole.json"
    result = run_cli("export", trace_id, "--out", str(out), "--warehouse", str(wh.root))
    assert result.returncode == 0, result.stderr
    exported = json.loads(out.read_text(), parse_float=Decimal)
    base_us = Decimal(exported["baseTimeNanoseconds"]) / 1000
    written = {(e["name"], Decimal(e["ts"]) + base_us) for e in exported["traceEvents"]
               if e.get("cat") == "kernel"}
    source = json.loads(gzip.decompress(absolute.read_bytes()), parse_float=Decimal)
    expected = {(e["name"], Decimal(e["ts"])) for e in source["traceEvents"] if e.get("cat") == "kernel"}
    # every kernel's start, read back as the trace's clock, to the nanosecond of the source's text
    assert {(name, ts.quantize(Decimal("0.001"))) for name, ts in written} == expected


def test_export_window_is_on_the_trace_clock(shifted: tuple[Warehouse, Path, Path], tmp_path: Path) -> None:
    """--window takes the trace's own (absolute) µs, as its file and the report's cards show them."""
    wh, _, absolute = shifted
    trace_id = _one(wh, "select trace_id from traces where source_path = ?", absolute)[0]
    source = json.loads(gzip.decompress(absolute.read_bytes()), parse_float=Decimal)
    kernels = sorted((Decimal(e["ts"]), e["name"]) for e in source["traceEvents"] if e.get("cat") == "kernel")
    start, name = kernels[len(kernels) // 2]
    out = tmp_path / "window.json"
    result = run_cli("export", trace_id, "--window", f"{start - 1}:{start + 1}", "--out", str(out),
                     "--warehouse", str(wh.root))
    assert result.returncode == 0, result.stderr
    exported = json.loads(out.read_text(), parse_float=Decimal)
    base_us = Decimal(exported["baseTimeNanoseconds"]) / 1000
    starts = {(e["name"], (Decimal(e["ts"]) + base_us).quantize(Decimal("0.001")))
              for e in exported["traceEvents"] if e.get("cat") == "kernel"}
    assert (name, start) in starts


def test_cards_print_finding_windows_on_the_trace_clock(shifted: tuple[Warehouse, Path, Path], tmp_path: Path) -> None:
    wh, _, absolute = shifted
    out = tmp_path / "report"
    result = run_cli("analyze", str(absolute), "--warehouse", str(wh.root), "--out", str(out))
    assert result.returncode == 0, result.stderr
    printed = re.findall(r"trace time ([0-9.]+)-([0-9.]+) us", (out / "analysis.md").read_text())
    assert printed
    trace_id, base = _one(wh, "select trace_id, ts_base_us from traces where source_path = ?", absolute)
    with wh.connect_read_only() as con:
        windows = con.execute("select ts_start_us, ts_end_us from findings where trace_id = ? and trace2_id is null "
                              "and ts_start_us is not null", [trace_id]).fetchall()
    expected = {(f"{Decimal(base) + Decimal(repr(start)):.1f}", f"{Decimal(base) + Decimal(repr(end)):.1f}")
                for start, end in windows}
    assert set(printed) <= expected and all(Decimal(start) > EPOCH_US for start, _ in printed)
