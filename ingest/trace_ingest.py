"""Ingest one trace file into a staging folder of Parquet tables (one folder per table)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ingest.checks import ingest_checks
from ingest.decode import EVENT_SCHEMA, decode_events
from ingest.errors import BadTraceError
from ingest.host_tree import build_host_tree
from ingest.reader import parse_trace_document, read_trace_bytes
from ingest.trace_info import trace_file_row

TRACE_ID_HEX_CHARS = 16
PARQUET_COMPRESSION = "zstd"
PARQUET_COMPRESSION_LEVEL = 1
TABLES = ("events", "host_ops", "gpu_ops", "flows", "trace_files", "ingest_checks")
_TIMED_PHASES = frozenset({"X", "i", "I"})


@dataclass(frozen=True)
class StagedTrace:
    """What a worker reports back after staging one trace."""

    trace_id: str
    path: str
    staging_dir: str
    event_count: int
    dropped_event_count: int
    uncompressed_bytes: int
    seconds: float


def trace_id_from_sha256(sha256: str) -> str:
    return sha256[:TRACE_ID_HEX_CHARS]


def _write(table: pa.Table, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        folder / "part-0.parquet",
        compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL,
    )


def stage_trace(
    path: Path, sha256: str, staging_dir: Path, tags: dict[str, str], version: str
) -> StagedTrace:
    """Parse `path` once and write its tables under `staging_dir/<table>/part-0.parquet`."""
    started = time.perf_counter()
    data = read_trace_bytes(path)
    document = parse_trace_document(path, data)
    del data
    decoded = decode_events(document.raw_events)
    del document.raw_events[:]
    timed = sum(c for ph, c in decoded.phase_counts.items() if ph in _TIMED_PHASES)
    if timed == 0:
        dropped = sum(decoded.dropped.values())
        raise BadTraceError(
            f"{path}: no usable events ({dropped} malformed events dropped); "
            "expected timed events with numeric 'ts' and 'dur'"
        )
    host = build_host_tree(decoded.host)
    trace_id = trace_id_from_sha256(sha256)

    with pq.ParquetWriter(
        _target(staging_dir, "events"),
        EVENT_SCHEMA,
        compression=PARQUET_COMPRESSION,
        compression_level=PARQUET_COMPRESSION_LEVEL,
    ) as writer:
        for batch in decoded.event_batches:
            writer.write_batch(batch)
    decoded.event_batches.clear()
    _write(host, staging_dir / "host_ops")
    _write(decoded.gpu, staging_dir / "gpu_ops")
    _write(decoded.flows, staging_dir / "flows")
    _write(ingest_checks(decoded.event_count, decoded.dropped, decoded.phase_counts), staging_dir / "ingest_checks")
    seconds = time.perf_counter() - started
    dropped_total = sum(decoded.dropped.values())
    _write(
        trace_file_row(
            path=path,
            sha256=sha256,
            uncompressed_bytes=document.uncompressed_bytes,
            metadata=document.metadata,
            tags=tags,
            linking_key=decoded.linking_key,
            event_count=decoded.event_count,
            dropped_event_count=dropped_total,
            ingest_seconds=seconds,
            version=version,
        ),
        staging_dir / "trace_files",
    )
    return StagedTrace(
        trace_id=trace_id,
        path=str(path),
        staging_dir=str(staging_dir),
        event_count=decoded.event_count,
        dropped_event_count=dropped_total,
        uncompressed_bytes=document.uncompressed_bytes,
        seconds=seconds,
    )


def _target(staging_dir: Path, table: str) -> Path:
    folder = staging_dir / table
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "part-0.parquet"
