"""One row per trace: file identity, device, runtime versions, distributed info, counts."""

from __future__ import annotations

import json
from datetime import datetime, timezone
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


def _device_name(devices: list[dict[str, Any]]) -> str | None:
    names = [str(d.get("name", "")).strip() for d in devices if isinstance(d, dict)]
    named = [n for n in names if n]
    return named[0] if named else None


def trace_file_row(
    *,
    path: Path,
    sha256: str,
    uncompressed_bytes: int,
    metadata: dict[str, Any],
    tags: dict[str, str],
    linking_key: str,
    event_count: int,
    dropped_event_count: int,
    ingest_seconds: float,
    version: str,
) -> pa.Table:
    devices = metadata.get("deviceProperties")
    devices = devices if isinstance(devices, list) else []
    versions = {k: str(metadata[k]) for k in _RUNTIME_VERSION_KEYS if k in metadata}
    runtime = "rocm" if any(k.startswith(("hip", "roctracer")) for k in versions) else (
        "cuda" if versions else None
    )
    dist = metadata.get("distributedInfo")
    dist = dist if isinstance(dist, dict) else None
    other = {k: v for k, v in metadata.items() if k not in ("deviceProperties", "distributedInfo")}

    def dist_int(key: str) -> int | None:
        value = dist.get(key) if dist else None
        return value if isinstance(value, int) else None

    row = {
        "source_path": str(path.resolve()),
        "file_name": path.name,
        "file_size_bytes": path.stat().st_size,
        "uncompressed_bytes": uncompressed_bytes,
        "sha256": sha256,
        "ingested_at": datetime.now(timezone.utc),
        "tags": list(tags.items()),
        "device_name": _device_name(devices),
        "device_count": len(devices),
        "device_properties": json.dumps(devices),
        "runtime": runtime,
        "runtime_versions": list(versions.items()),
        "distributed_backend": str(dist.get("backend")) if dist and "backend" in dist else None,
        "world_size": dist_int("world_size"),
        "rank": dist_int("rank"),
        "distributed_info": json.dumps(dist) if dist is not None else None,
        "linking_key": linking_key,
        "event_count": event_count,
        "dropped_event_count": dropped_event_count,
        "trace_metadata": json.dumps(other, default=str),
        "ingest_seconds": ingest_seconds,
        "tracelake_version": version,
    }
    return pa.Table.from_pylist([row], schema=TRACE_FILE_SCHEMA)
