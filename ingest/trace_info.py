"""One row per trace: file identity, device, runtime versions, distributed info, counts.

The typed columns take only values of their type and range; a wrong one (a bool rank, a world
size of 2^31, a `deviceProperties` that is not a list) is stored as null and counted, and the
field's JSON is kept as it was.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

TRACE_FILE_SCHEMA = pa.schema(
    [
        ("source_path", pa.string()),
        ("file_name", pa.string()),
        ("file_size_bytes", pa.int64()),
        ("uncompressed_bytes", pa.int64()),
        ("sha256", pa.string()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
        ("tags", pa.map_(pa.string(), pa.string())),
        ("device_name", pa.string()),
        ("device_count", pa.int32()),
        ("device_properties", pa.string()),
        ("runtime", pa.string()),
        ("runtime_versions", pa.map_(pa.string(), pa.string())),
        ("distributed_backend", pa.string()),
        ("world_size", pa.int32()),
        ("rank", pa.int32()),
        ("distributed_info", pa.string()),
        ("linking_key", pa.string()),
        ("event_count", pa.int64()),
        ("dropped_event_count", pa.int64()),
        ("trace_metadata", pa.string()),
        ("ingest_seconds", pa.float64()),
        ("tracelake_version", pa.string()),
        ("ts_base_us", pa.int64()),
    ]
)

_RUNTIME_VERSION_KEYS = (
    "cuda_runtime_version",
    "cuda_driver_version",
    "cupti_version",
    "hip_runtime_version",
    "hip_driver_version",
    "roctracer_version",
)
_INT32_MAX = 2**31 - 1  # world_size and rank are int32 columns


@dataclass(frozen=True)
class MetadataColumns:
    """The trace_files columns that come from the trace's metadata."""

    device_name: str | None = None
    device_count: int = 0
    device_properties: str = "[]"
    runtime: str | None = None
    runtime_versions: dict[str, str] = field(default_factory=dict)
    distributed_backend: str | None = None
    world_size: int | None = None
    rank: int | None = None
    distributed_info: str | None = None
    trace_metadata: str = "{}"
    nulled: Counter[str] = field(default_factory=Counter)  # "nulled_<field>": fields of a wrong type or range


def _int_in(value: Any, low: int, high: int) -> int | None:
    return value if type(value) is int and low <= value <= high else None


def metadata_columns(metadata: dict[str, Any]) -> MetadataColumns:
    nulled: Counter[str] = Counter()

    def typed(name: str, value: Any, kept: Any) -> Any:
        if value is not None and kept is None:
            nulled[f"nulled_{name}"] += 1
        return kept

    raw_devices = metadata.get("deviceProperties")
    devices = typed("deviceProperties", raw_devices, raw_devices if isinstance(raw_devices, list) else None) or []
    device_entries = [d for d in devices if isinstance(d, dict)]
    names = [d["name"].strip() for d in device_entries if type(d.get("name")) is str and d["name"].strip()]
    versions: dict[str, str] = {}
    for key in _RUNTIME_VERSION_KEYS:
        value = metadata.get(key)
        version = typed(key, value, str(value) if type(value) in (str, int, float) else None)
        if version is not None:
            versions[key] = version
    runtime = "rocm" if any(k.startswith(("hip", "roctracer")) for k in versions) else (
        "cuda" if versions else None
    )
    raw_dist = metadata.get("distributedInfo")
    dist = typed("distributedInfo", raw_dist, raw_dist if isinstance(raw_dist, dict) else None)
    backend = world_size = rank = None
    if dist is not None:
        backend = typed("distributedInfo.backend", dist.get("backend"),
                        dist.get("backend") if type(dist.get("backend")) is str else None)
        world_size = typed("distributedInfo.world_size", dist.get("world_size"), _int_in(dist.get("world_size"), 1, _INT32_MAX))
        rank_max = _INT32_MAX if world_size is None else world_size - 1
        rank = typed("distributedInfo.rank", dist.get("rank"), _int_in(dist.get("rank"), 0, rank_max))
    return MetadataColumns(
        device_name=names[0] if names else None,
        device_count=len(device_entries),
        device_properties=json.dumps(devices),
        runtime=runtime,
        runtime_versions=versions,
        distributed_backend=backend,
        world_size=world_size,
        rank=rank,
        distributed_info=json.dumps(dist) if dist is not None else None,
        # every top-level key as the source had it (secrets masked: ingest/metadata.py), deviceProperties and
        # distributedInfo too: what `tracelake export` writes back, so an exported trace is the same device
        trace_metadata=json.dumps(metadata, default=str),
        nulled=nulled,
    )


def trace_file_row(
    *,
    path: Path,
    sha256: str,
    uncompressed_bytes: int,
    columns: MetadataColumns,
    tags: dict[str, str],
    linking_key: str,
    event_count: int,
    dropped_event_count: int,
    ingest_seconds: float,
    version: str,
    ts_base_us: int = 0,
) -> pa.Table:
    row = {
        "source_path": str(path.resolve()),
        "file_name": path.name,
        "file_size_bytes": path.stat().st_size,
        "uncompressed_bytes": uncompressed_bytes,
        "sha256": sha256,
        "ingested_at": datetime.now(UTC),
        "tags": list(tags.items()),
        "device_name": columns.device_name,
        "device_count": columns.device_count,
        "device_properties": columns.device_properties,
        "runtime": columns.runtime,
        "runtime_versions": list(columns.runtime_versions.items()),
        "distributed_backend": columns.distributed_backend,
        "world_size": columns.world_size,
        "rank": columns.rank,
        "distributed_info": columns.distributed_info,
        "linking_key": linking_key,
        "event_count": event_count,
        "dropped_event_count": dropped_event_count,
        "trace_metadata": columns.trace_metadata,
        "ingest_seconds": ingest_seconds,
        "tracelake_version": version,
        "ts_base_us": ts_base_us,
    }
    return pa.Table.from_pylist([row], schema=TRACE_FILE_SCHEMA)
