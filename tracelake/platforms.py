"""Platform specs from the dbt seeds, readable without a warehouse (CLI validation, listing)."""

from __future__ import annotations

import duckdb
from pydantic import BaseModel

from ingest.errors import TraceLakeError
from tracelake.config import PROJECT_ROOT

SEEDS = PROJECT_ROOT / "seeds"


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


def load_platforms() -> list[PlatformSpec]:
    con = duckdb.connect()
    rows = con.execute(
        f"""
        select p.platform, p.display_name, p.vendor, p.kind, p.source, p.mem_bw_gbps, p.memory_gb,
               coalesce(map_from_entries(list((k.compute_spec, k.peak_tflops)) filter (where k.compute_spec is not null)), map())
        from read_csv('{SEEDS / "platforms.csv"}', header = true) p
        left join read_csv('{SEEDS / "platform_peaks.csv"}', header = true) k on p.platform = k.platform
        group by all order by min(p.detect_priority)
        """
    ).fetchall()
    return [
        PlatformSpec(platform=r[0], display_name=r[1], vendor=r[2], kind=r[3], source=r[4],
                     mem_bw_gbps=r[5], memory_gb=r[6], peaks_tflops=dict(r[7]))
        for r in rows
    ]


def resolve_platform(name: str) -> str:
    """The seed's id for a user-given platform name (case-insensitive), or a clear error."""
    known = [p.platform for p in load_platforms()]
    for platform in known:
        if platform.lower() == name.strip().lower():
            return platform
    raise UnknownPlatformError(f"unknown platform {name!r}; valid platforms: {', '.join(known)}")
