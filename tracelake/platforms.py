"""Platform specs from the dbt seeds, readable without a warehouse (CLI validation, listing)."""

from __future__ import annotations

import csv
from pathlib import Path

from pydantic import BaseModel

from tracelake.config import DBT_PROJECT_DIR, SHIPPED_DIR
from tracelake.core.errors import TraceLakeError

SEEDS = DBT_PROJECT_DIR / "seeds"


class PlatformSpec(BaseModel):
    platform: str
    display_name: str
    vendor: str
    kind: str
    source: str
    mem_bw_gbps: float
    memory_gb: float
    peaks_tflops: dict[str, float]


class UnknownPlatformError(TraceLakeError):
    pass


def _seed_rows(name: str) -> list[dict[str, str]]:
    """A seed's rows as text: from seeds/ in a source checkout, else from the seed tables shipped with
    the package (an installed wheel)."""
    path = SEEDS / name
    if path.is_file():
        with path.open(newline="") as handle:
            return list(csv.DictReader(handle))
    import pyarrow.parquet as pq  # noqa: PLC0415 - only without the project's seeds

    table = pq.read_table(SHIPPED_DIR / "seeds" / f"{Path(name).stem}.parquet")
    return [{key: "" if value is None else str(value) for key, value in row.items()} for row in table.to_pylist()]


def load_platforms() -> list[PlatformSpec]:
    """The platforms in detection order. Read with the csv module: the seeds are a few dozen rows,
    and an in-memory DuckDB for them cost ~0.03 s and ~40 MB of RSS per call (bench/analyze.py)."""
    peaks: dict[str, dict[str, float]] = {}
    for row in _seed_rows("platform_peaks.csv"):
        if row["compute_spec"]:
            peaks.setdefault(row["platform"], {})[row["compute_spec"]] = float(row["peak_tflops"])
    rows = sorted(_seed_rows("platforms.csv"), key=lambda row: int(row["detect_priority"]))
    return [
        PlatformSpec(platform=row["platform"], display_name=row["display_name"], vendor=row["vendor"],
                     kind=row["kind"], source=row["source"], mem_bw_gbps=float(row["mem_bw_gbps"]),
                     memory_gb=float(row["memory_gb"]), peaks_tflops=peaks.get(row["platform"], {}))
        for row in rows
    ]


def resolve_platform(name: str) -> str:
    """The seed's id for a user-given platform name (case-insensitive), or a clear error."""
    known = [p.platform for p in load_platforms()]
    for platform in known:
        if platform.lower() == name.strip().lower():
            return platform
    raise UnknownPlatformError(f"unknown platform {name!r}; valid platforms: {', '.join(known)}")
