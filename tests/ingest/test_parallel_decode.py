"""Decoding one trace on several cores gives exactly the single-core result; forked workers' results
and failures reach the caller."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest

from tests.conftest import TRACES
from tracelake.ingest import parallel_decode
from tracelake.ingest.reader import parse_trace_document, read_trace_bytes

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"


def test_parallel_decode_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = parse_trace_document(RESNET, read_trace_bytes(RESNET))
    serial = parallel_decode.decode_to_parquet(document.raw_events, tmp_path / "serial", workers=1)
    monkeypatch.setattr(parallel_decode, "MIN_EVENTS_PER_WORKER", 1000)
    parallel = parallel_decode.decode_to_parquet(document.raw_events, tmp_path / "parallel", workers=3)

    parts = len(list((tmp_path / "parallel").glob("part-*.parquet")))
    assert parts == 3 * parallel_decode.RANGES_PER_WORKER  # the workers shared the ranges out
    assert parallel.event_count == serial.event_count == 56451
    assert parallel.linking_key == serial.linking_key == "correlation"
    assert parallel.phase_counts == serial.phase_counts
    for table in ("host", "gpu", "flows"):
        assert getattr(parallel, table).equals(getattr(serial, table)), table
    serial_events = pq.read_table(tmp_path / "serial").sort_by("event_idx")
    parallel_events = pq.read_table(tmp_path / "parallel").sort_by("event_idx")
    assert parallel_events.equals(serial_events)


def test_workers_report_the_share_of_events_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress display's bytes and ETA come from the ranges the forked workers finish."""
    document = parse_trace_document(RESNET, read_trace_bytes(RESNET))
    monkeypatch.setattr(parallel_decode, "MIN_EVENTS_PER_WORKER", 1000)
    shares: list[float] = []
    decoded = parallel_decode.decode_to_parquet(document.raw_events, tmp_path / "events", workers=2,
                                                on_progress=shares.append)
    assert decoded.event_count == 56451
    assert len(shares) >= 2  # heard before the end, not only once at it
    assert shares == sorted(shares) and len(set(shares)) == len(shares)
    assert 0 < shares[0] < 1 and shares[-1] == 1.0


EVENT = msgspec.Raw(b'{"ph":"X","cat":"cpu_op","name":"aten::add","ts":1.0,"dur":2.0,"pid":1,"tid":1}')
COUNT = 2 * parallel_decode.MIN_EVENTS_PER_WORKER + 10  # enough for two workers


def test_two_workers_decode_every_event_once(tmp_path: Path) -> None:
    decoded = parallel_decode.decode_to_parquet([EVENT] * COUNT, tmp_path / "events", workers=2)
    assert decoded.event_count == COUNT
    assert decoded.host.num_rows == COUNT
    assert sorted(decoded.host.column("event_idx").to_pylist()) == list(range(COUNT))
    files = list((tmp_path / "events").glob("*.parquet"))
    assert len(files) == 2 * parallel_decode.RANGES_PER_WORKER
    assert sum(pq.read_metadata(p).num_rows for p in files) == COUNT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events"]  # no result files left behind


def test_a_failing_worker_raises_in_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = parallel_decode._decode_range

    def second_range_fails(first: int, stop: int, events_dir: Path, part: int):
        if part == 1:
            raise ValueError("worker 1 could not decode its range")
        return real(first, stop, events_dir, part)

    monkeypatch.setattr(parallel_decode, "_decode_range", second_range_fails)  # inherited by the fork
    with pytest.raises(ValueError, match="worker 1 could not decode"):
        parallel_decode.decode_to_parquet([EVENT] * COUNT, tmp_path / "events", workers=2)
    assert not list(tmp_path.glob(".decoded-*"))
