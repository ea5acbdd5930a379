"""What staging a trace produces: its tables' folders and the worker's report. Kept free of the
decoding libraries so that the warehouse (and `tracelake sql`) can import it cheaply."""

from __future__ import annotations

from dataclasses import dataclass

TABLES = ("events", "host_ops", "gpu_ops", "flows", "trace_files", "ingest_checks")


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
