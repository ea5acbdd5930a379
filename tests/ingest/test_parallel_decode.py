"""Decoding one trace on several cores gives exactly the single-core result."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ingest import parallel_decode
from ingest.reader import parse_trace_document, read_trace_bytes
from tests.conftest import TRACES

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"


def test_parallel_decode_equals_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    document = parse_trace_document(RESNET, read_trace_bytes(RESNET))
    serial = parallel_decode.decode_to_parquet(document.raw_events, tmp_path / "serial", workers=1)
    monkeypatch.setattr(parallel_decode, "MIN_EVENTS_PER_WORKER", 1000)
    parallel = parallel_decode.decode_to_parquet(document.raw_events, tmp_path / "parallel", workers=3)

    assert len(list((tmp_path / "parallel").glob("part-*.parquet"))) == 3
    assert parallel.event_count == serial.event_count == 56451
    assert parallel.linking_key == serial.linking_key == "correlation"
    assert parallel.phase_counts == serial.phase_counts
    for table in ("host", "gpu", "flows"):
        assert getattr(parallel, table).equals(getattr(serial, table)), table
    serial_events = pq.read_table(tmp_path / "serial").sort_by("event_idx")
    parallel_events = pq.read_table(tmp_path / "parallel").sort_by("event_idx")
    assert parallel_events.equals(serial_events)
