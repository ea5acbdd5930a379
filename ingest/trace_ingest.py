"""Ingest one trace file into a staging folder of Parquet tables (one folder per table)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tracelake.core.errors import BadTraceError
from tracelake.ingest.checks import DeviceWorkCounts, ingest_checks
from tracelake.ingest.host_tree import build_host_tree
from tracelake.ingest.parallel_decode import decode_to_parquet
from tracelake.ingest.parquet_io import write_table
from tracelake.ingest.reader import PreRead, parse_trace_document, read_trace_bytes
from tracelake.ingest.staged import StagedTrace
from tracelake.ingest.trace_info import metadata_columns, trace_file_row

TRACE_ID_HEX_CHARS = 16
_TIMED_PHASES = frozenset({"X", "i", "I"})


def trace_id_from_sha256(sha256: str) -> str:
    return sha256[:TRACE_ID_HEX_CHARS]


def stage_trace(
    path: Path, sha256: str, staging_dir: Path, tags: dict[str, str], version: str, workers: int = 1,
    pre_read: PreRead | None = None, while_decoding: Callable[[], None] | None = None,
    on_progress: Callable[[float], None] | None = None,
) -> StagedTrace:
    """Parse `path` once and write its tables under `staging_dir/<table>/part-*.parquet`;
    `while_decoding` runs here while forked workers decode the events (not called without them),
    and `on_progress` hears the share of events they decoded."""
    try:
        return _stage(path, sha256, staging_dir, tags, version, workers, pre_read, while_decoding, on_progress)
    except MemoryError:
        raise BadTraceError(
            f"{path}: not enough memory to ingest this trace; free memory or profile fewer steps"
        ) from None


def _stage(
    path: Path, sha256: str, staging_dir: Path, tags: dict[str, str], version: str, workers: int,
    pre_read: PreRead | None, while_decoding: Callable[[], None] | None,
    on_progress: Callable[[float], None] | None = None,
) -> StagedTrace:
    started = time.perf_counter()
    data = read_trace_bytes(path, pre_read)
    document = parse_trace_document(path, data)
    del data
    columns = metadata_columns(document.metadata)
    decoded = decode_to_parquet(document.raw_events, staging_dir / "events", workers, while_decoding, on_progress)
    del document.raw_events[:]
    timed = sum(c for ph, c in decoded.phase_counts.items() if ph in _TIMED_PHASES)
    if timed == 0:
        dropped = sum(decoded.dropped.values())
        raise BadTraceError(
            f"{path}: no usable events ({dropped} malformed events dropped); "
            "expected timed events with numeric 'ts' and 'dur'"
        )
    trace_id = trace_id_from_sha256(sha256)
    # Parquet writing releases the GIL: write the finished tables while the tree is built.
    with ThreadPoolExecutor(max_workers=1) as writer:
        pending = [
            writer.submit(write_table, decoded.gpu, staging_dir / "gpu_ops"),
            writer.submit(write_table, decoded.flows, staging_dir / "flows"),
        ]
        tree = build_host_tree(decoded.host)
        pending.append(writer.submit(
            write_table,
            ingest_checks(
                decoded.event_count, decoded.dropped, decoded.phase_counts,
                document.repaired + decoded.repaired + columns.nulled, document.masked_keys,
                DeviceWorkCounts(decoded.gpu.num_rows, decoded.unrecognized_device, decoded.begin_end_paired,
                                 decoded.begin_end_unmatched),
                too_deep_events=tree.too_deep_events,
            ),
            staging_dir / "ingest_checks",
        ))
        write_table(tree.host, staging_dir / "host_ops")
        for done in pending:
            done.result()
    seconds = time.perf_counter() - started
    dropped_total = sum(decoded.dropped.values())
    write_table(
        trace_file_row(
            path=path,
            sha256=sha256,
            uncompressed_bytes=document.uncompressed_bytes,
            columns=columns,
            tags=tags,
            linking_key=decoded.linking_key or "correlation",
            event_count=decoded.event_count,
            dropped_event_count=dropped_total,
            ingest_seconds=seconds,
            ts_base_us=decoded.ts_base_us,
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
