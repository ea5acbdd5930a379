"""What the multi-kernel agent reports: its metrics, the GPU events its findings claim, and the
queries that reproduce them (the findings' evidence_sql)."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel

from tracelake.analyzers import settings

AGENT_NAME = "multi_kernel"
TIER = "system"
DISPLAY_NAME = "Memory copies and collectives"

MemcpyDirection = Literal["D2H", "H2D", "D2D", "other"]
MEMCPY_DIRECTIONS: tuple[MemcpyDirection, ...] = ("D2H", "H2D", "D2D", "other")
FLAGGED_DIRECTIONS: tuple[MemcpyDirection, ...] = ("D2H", "H2D")


class TransferStats(BaseModel):
    count: int = 0
    total_time_ms: float = 0.0
    exposed_time_ms: float = 0.0  # time not under any computation or communication kernel
    avg_time_us: float | None = None
    max_time_us: float | None = None
    total_bytes: int | None = None
    avg_bytes: float | None = None
    percent_of_total: float = 0.0  # total_time_ms as % of E2E (TraceLens rule input)
    achieved_gb_per_s: float | None = None  # bytes / copy time over the copies that say their bytes
    pageable_count: int = 0  # copies whose host side is pageable memory (the event name says so)
    pageable_time_ms: float = 0.0
    pageable_bytes: int | None = None
    pageable_exposed_ms: float = 0.0

    @property
    def mostly_pageable(self) -> bool:
        """Pageable copies hold most of the direction's copy time: the pinned-memory advice is theirs."""
        return self.total_time_ms > 0 and self.pageable_time_ms / self.total_time_ms > settings.MOSTLY_PAGEABLE_SHARE
    pinned_count: int = 0
    flagged: bool = False
    flag_reasons: list[str] = []


class CollectiveOp(BaseModel):
    name: str
    count: int
    total_time_ms: float
    avg_time_us: float
    library: str | None


class CollectiveModel(BaseModel):
    """The exposed collectives' time against a floor bus bandwidth (from the bytes they move)."""

    modeled_count: int  # kernels of the main collective (the one with the most exposed time)
    modeled_share: float  # of the unhideable exposed time, the part whose bytes are known
    bytes_min: float
    bytes_max: float
    bus_gb_per_s_min: float
    bus_gb_per_s_max: float
    floor_gb_per_s: float  # settings.LINK_FLOOR_GBPS
    saving_ms: float  # the unhideable time above what the floor bandwidth would take
    collective_names: list[str]
    # time vs bytes between the smallest and the largest message size: (bytes ratio, time ratio)
    size_scaling: tuple[float, float] | None = None

    @property
    def waiting_dominated(self) -> bool:
        if self.size_scaling is None:
            return False
        bytes_ratio, time_ratio = self.size_scaling
        return time_ratio < settings.COLLECTIVE_WAIT_SCALING_MAX * bytes_ratio


class MultiKernelMetrics(BaseModel):
    total_time_ms: float
    computation_time_ms: float
    memcpy_by_direction: dict[str, TransferStats]
    memcpy_total_count: int
    memcpy_total_time_ms: float
    unlinked_memcpy_count: int
    memcpy_flagged: bool
    collective_count: int
    collective_time_ms: float  # sum of collective kernel durations (not a union)
    collective_avg_us: float | None
    top_collectives: list[CollectiveOp]
    unlinked_collective_count: int
    unlinked_collective_time_ms: float
    total_comm_time_ms: float  # union of communication intervals (gpu_timeline)
    exposed_comm_time_ms: float
    exposed_comm_percent: float
    exposed_comm_flagged: bool
    comm_overlap_ratio: float | None  # 1 - exposed / total communication; None without collectives
    overlap_flagged: bool
    hideable_comm_time_ms: float  # min(exposed comm, computation not already hiding communication)
    collective_model: CollectiveModel | None = None  # the unhideable collectives against a floor bus bandwidth
    total_memcpy_time_ms: float
    exposed_memcpy_time_ms: float
    exposed_memcpy_percent: float
    memcpy_overlap_ratio: float | None
    patterns_detected: list[str]


class Claims(NamedTuple):
    """The GPU events (kernels.event_idx -> µs) each finding would rest on."""
    copies: dict[str, dict[int, float]]  # direction -> each linked copy's exposed time
    hideable_comm: dict[int, float]  # the exposed collective time free computation can hide
    unhideable_comm: dict[int, float]  # the rest of the exposed collective time


# ---- evidence: the queries a reader runs to reproduce the numbers (printed in the findings) -----

TIMELINE_SQL = """
with params as (select ?::varchar as trace_id)
select total_time_ms, computation_time_ms, total_comm_time_ms, exposed_comm_time_ms, exposed_comm_time_percent,
    total_memcpy_time_ms, exposed_memcpy_time_ms, exposed_memcpy_time_percent
from gpu_timeline, params
where gpu_timeline.trace_id = params.trace_id"""

# The memcpy_by_direction mart: per direction, the copies and the part of each that no computation
# or communication kernel hides, and its shares of the report's E2E (workload_facts.analysis_window_ms:
# the timeline less the window-edge idle). The agent reads it, and its findings print this read as evidence.
MEMCPY_SQL = """
select m.* exclude (trace_id),
    100.0 * m.total_time_ms / f.analysis_window_ms as percent_of_e2e,
    100.0 * m.exposed_time_ms / f.analysis_window_ms as exposed_percent_of_e2e
from memcpy_by_direction as m
inner join workload_facts as f on f.trace_id = m.trace_id
where m.trace_id = ?
order by m.direction"""
