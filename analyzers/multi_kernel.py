"""Multi-kernel analyzer (system tier): memory copies by direction, collectives, and how well
communication hides under computation.

Rules follow TraceLens' multi-kernel analyzer (host<->device copy directions flagged above 5 % of
E2E or 10 transfers; exposed communication above 5 % of E2E; communication/computation overlap
below 70 % when there is at least 100 us of communication). Unlike TraceLens, the findings are
quantified: the exposed time that could hide under idle computation (communication) or that is
not overlapped at all (copies), times a low / mid / high recovery fraction.

Every time here is over GPU events linked to a host launch, the scope of `gpu_timeline`. Copies
come from the `memcpy_by_direction` and `memcpy_copies` marts, collectives from
`comm_kernels_by_name` and `collectives`, and each collective's exposed time from
`exposed_comm_events`; a finding claims the GPU events its impact rests on (`claimed_kernels`: the
copies' exposed time, or the collectives' exposed time split in start order between the part free
computation can hide and the rest), and its impact is computed from their sum
(`multi_kernel_findings`).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, overload

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.common import NO_GPU_TIMELINE, gpu_timeline_row, no_data_result, query_rows
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
from tracelake.analyzers.multi_kernel_findings import findings
from tracelake.analyzers.multi_kernel_metrics import (
    AGENT_NAME,
    DISPLAY_NAME,
    FLAGGED_DIRECTIONS,
    MEMCPY_DIRECTIONS,
    MEMCPY_SQL,
    TIER,
    TIMELINE_SQL,
    Claims,
    CollectiveModel,
    CollectiveOp,
    MemcpyDirection,
    MultiKernelMetrics,
    TransferStats,
)
from tracelake.analyzers.multi_kernel_waiting import collective_waiting

__all__ = ["AGENT_NAME", "DISPLAY_NAME", "FLAGGED_DIRECTIONS", "MEMCPY_SQL", "TIER", "TIMELINE_SQL", "CollectiveModel",
           "CollectiveOp", "MemcpyDirection", "MultiKernelMetrics", "TransferStats", "analyze"]

CLAIMED_COPIES_SQL = ("select direction, event_idx, exposed_us from memcpy_copies "
                      "where trace_id = ? and is_linked and exposed_us > 0 order by direction, event_idx")
EXPOSED_COMM_SQL = ("select event_idx, exposed_us, exposed_before_us from exposed_comm_events "
                    "where trace_id = ? order by event_idx")
COLLECTIVES_SQL = "select * from comm_kernels_by_name where trace_id = ? order by total_time_ms desc, name"
COLLECTIVE_ROWS_SQL = ("select event_idx, collective_name, bytes, dur_us, bus_factor, bus_gb_per_s from collectives "
                       "where trace_id = ? and bytes is not null and dur_us > 0 order by ts_us, event_idx")


@overload
def _round(value: float, digits: int = 4) -> float: ...


@overload
def _round(value: None, digits: int = 4) -> None: ...


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _transfer_stats(row: dict[str, Any]) -> TransferStats:
    """One direction's copies (a memcpy_by_direction row), flagged by the TraceLens rules."""
    stats = TransferStats(
        count=int(row["copy_count"]), total_time_ms=_round(row["total_time_ms"]),
        exposed_time_ms=_round(row["exposed_time_ms"]), avg_time_us=_round(row["avg_time_us"], 3),
        max_time_us=_round(row["max_time_us"], 3),
        total_bytes=None if row["total_bytes"] is None else int(row["total_bytes"]),
        avg_bytes=_round(row["avg_bytes"], 1),
        percent_of_total=_round(row["percent_of_e2e"], 3),
        achieved_gb_per_s=_round(row["achieved_gb_per_s"], 2),
        pageable_count=int(row["pageable_count"] or 0), pinned_count=int(row["pinned_count"] or 0),
        pageable_time_ms=_round(row["pageable_time_ms"]) or 0.0,
        pageable_bytes=None if row["pageable_bytes"] is None else int(row["pageable_bytes"]),
        pageable_exposed_ms=_round(row["pageable_exposed_ms"]) or 0.0,
    )
    if row["direction"] in FLAGGED_DIRECTIONS:
        if stats.percent_of_total > settings.MEMCPY_DIRECTION_PERCENT_MAX:
            stats.flag_reasons.append(f"time > {settings.MEMCPY_DIRECTION_PERCENT_MAX:g} % of E2E")
        if stats.count > settings.MEMCPY_DIRECTION_COUNT_MAX:
            stats.flag_reasons.append(f"count > {settings.MEMCPY_DIRECTION_COUNT_MAX}")
        if row["exposed_percent_of_e2e"] >= settings.TRANSFER_EXPOSED_PERCENT_MIN:
            stats.flag_reasons.append(f"exposed time >= {settings.TRANSFER_EXPOSED_PERCENT_MIN:g} % of E2E")
        stats.flagged = bool(stats.flag_reasons)
    return stats


def _memcpy_directions(db: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[dict[str, TransferStats], int]:
    """(the linked copies' stats by direction, the number of copies with no host launch)."""
    directions: dict[str, TransferStats] = {d: TransferStats() for d in MEMCPY_DIRECTIONS}
    unlinked_memcpy = 0
    for row in query_rows(db, MEMCPY_SQL, [trace_id]):
        unlinked_memcpy += int(row["unlinked_count"])
        if row["copy_count"]:
            directions[row["direction"]] = _transfer_stats(row)
    return directions, unlinked_memcpy


def _collective_model(db: duckdb.DuckDBPyConnection, trace_id: str,
                      unhideable: dict[int, float]) -> CollectiveModel | None:
    """The unhideable exposed collectives against the floor bus bandwidth, from the bytes they move."""
    rows = [r for r in query_rows(db, COLLECTIVE_ROWS_SQL, [trace_id]) if int(r["event_idx"]) in unhideable]
    total = sum(unhideable.values())
    if not rows or total <= 0:
        return None
    floor = settings.LINK_FLOOR_GBPS
    saving = 0.0
    for r in rows:
        ideal_us = float(r["bytes"]) * float(r["bus_factor"]) / (floor * 1e3)
        saving += unhideable[int(r["event_idx"])] * max(0.0, 1.0 - ideal_us / float(r["dur_us"]))
    # the facts quoted are the collective (all-reduce, ...) with the most exposed time
    exposed_by_name: dict[str, float] = defaultdict(float)
    for r in rows:
        exposed_by_name[r["collective_name"] or ""] += unhideable[int(r["event_idx"])]
    main_name = max(exposed_by_name, key=exposed_by_name.__getitem__)
    main = [r for r in rows if (r["collective_name"] or "") == main_name]
    by_size: dict[float, list[float]] = defaultdict(list)
    for r in main:
        by_size[float(r["bytes"])].append(float(r["dur_us"]))
    small, large = min(by_size), max(by_size)
    scaling = None
    if small > 0 and large / small >= settings.COLLECTIVE_SIZE_RATIO_MIN:
        scaling = (large / small, statistics.median(by_size[large]) / statistics.median(by_size[small]))
    return CollectiveModel(
        modeled_count=len(main), modeled_share=sum(unhideable[int(r["event_idx"])] for r in rows) / total,
        bytes_min=small, bytes_max=large,
        bus_gb_per_s_min=min(float(r["bus_gb_per_s"]) for r in main),
        bus_gb_per_s_max=max(float(r["bus_gb_per_s"]) for r in main),
        floor_gb_per_s=floor, saving_ms=saving / 1000.0,
        collective_names=[main_name] if main_name else [],
        size_scaling=scaling)


def _claimed_copies(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, dict[int, float]]:
    claims: dict[str, dict[int, float]] = {d: {} for d in MEMCPY_DIRECTIONS}
    for direction, event_idx, exposed_us in db.execute(CLAIMED_COPIES_SQL, [trace_id]).fetchall():
        claims[direction][int(event_idx)] = float(exposed_us)
    return claims


def _claimed_comm(db: duckdb.DuckDBPyConnection, trace_id: str, hideable_us: float) -> dict[str, dict[int, float]]:
    """Each exposed collective's time (exposed_comm_events: per trace these add up to gpu_timeline's
    exposed communication), split in start order between the part free computation can hide (the
    first `hideable_us`) and the rest. The collective across that line counts in the overlap
    finding only (each GPU event in one finding: the claims ledger), for the part it can hide."""
    hideable: dict[int, float] = {}
    unhideable: dict[int, float] = {}
    for idx, exposed_us, exposed_before_us in db.execute(EXPOSED_COMM_SQL, [trace_id]).fetchall():
        hideable_part = min(exposed_us, max(hideable_us - exposed_before_us, 0.0))
        if hideable_part > 0:
            hideable[int(idx)] = float(hideable_part)
        elif exposed_us - hideable_part > 0:
            unhideable[int(idx)] = float(exposed_us - hideable_part)
    return {"hideable_comm": hideable, "unhideable_comm": unhideable}


def _hideable_comm_ms(tl: dict[str, Any]) -> float:
    """Exposed communication the computation could hide: computation already hiding communication
    cannot hide more of it."""
    total_comm = float(tl["total_comm_time_ms"] or 0.0)
    exposed_comm = float(tl["exposed_comm_time_ms"] or 0.0)
    computation = float(tl["computation_time_ms"] or 0.0)
    return max(0.0, min(exposed_comm, computation - (total_comm - exposed_comm)))


def _metrics(tl: dict[str, Any], directions: dict[str, TransferStats], unlinked_memcpy: int,
             collectives: list[dict[str, Any]]) -> MultiKernelMetrics:
    e2e_ms = float(tl["total_time_ms"])
    linked = [r for r in collectives if r["is_linked"]]
    collective_count = sum(int(r["kernel_count"]) for r in linked)
    collective_time_ms = sum(float(r["total_time_ms"]) for r in linked)
    total_comm = float(tl["total_comm_time_ms"] or 0.0)
    exposed_comm = float(tl["exposed_comm_time_ms"] or 0.0)
    computation = float(tl["computation_time_ms"] or 0.0)
    overlap_ratio = 1.0 - exposed_comm / total_comm if total_comm > 0 else None
    total_memcpy = float(tl["total_memcpy_time_ms"] or 0.0)
    exposed_memcpy = float(tl["exposed_memcpy_time_ms"] or 0.0)
    return MultiKernelMetrics(
        total_time_ms=_round(e2e_ms),
        computation_time_ms=_round(computation),
        memcpy_by_direction=directions,
        memcpy_total_count=sum(s.count for s in directions.values()),
        memcpy_total_time_ms=_round(sum(s.total_time_ms for s in directions.values())),
        unlinked_memcpy_count=unlinked_memcpy,
        memcpy_flagged=any(s.flagged for s in directions.values()),
        collective_count=collective_count,
        collective_time_ms=_round(collective_time_ms),
        collective_avg_us=_round(1000.0 * collective_time_ms / collective_count, 3) if collective_count else None,
        top_collectives=[CollectiveOp(name=r["name"], count=int(r["kernel_count"]), total_time_ms=_round(r["total_time_ms"]),
                                      avg_time_us=_round(r["avg_time_us"], 3), library=r["library"])
                         for r in linked[:settings.TOP_COLLECTIVES]],
        unlinked_collective_count=sum(int(r["kernel_count"]) for r in collectives if not r["is_linked"]),
        unlinked_collective_time_ms=_round(sum(float(r["total_time_ms"]) for r in collectives if not r["is_linked"])),
        total_comm_time_ms=_round(total_comm),
        exposed_comm_time_ms=_round(exposed_comm),
        exposed_comm_percent=_round(tl["exposed_comm_time_percent"] or 0.0, 3),
        exposed_comm_flagged=total_comm > 0 and float(tl["exposed_comm_time_percent"] or 0.0) > settings.EXPOSED_COMM_PERCENT_MAX,
        comm_overlap_ratio=_round(overlap_ratio),
        overlap_flagged=(overlap_ratio is not None and 1000.0 * total_comm >= settings.COMM_OVERLAP_MIN_TOTAL_US
                         and overlap_ratio < settings.COMM_OVERLAP_RATIO_MIN),
        hideable_comm_time_ms=_round(_hideable_comm_ms(tl)),
        total_memcpy_time_ms=_round(total_memcpy),
        exposed_memcpy_time_ms=_round(exposed_memcpy),
        exposed_memcpy_percent=_round(tl["exposed_memcpy_time_percent"] or 0.0, 3),
        memcpy_overlap_ratio=_round(1.0 - exposed_memcpy / total_memcpy) if total_memcpy > 0 else None,
        patterns_detected=[],
    )


def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Memcpy, collective and overlap issues for one trace."""
    tl = gpu_timeline_row(db, TIMELINE_SQL, ctx.trace_id)
    if tl is None:
        return no_data_result(AGENT_NAME, "system", NO_GPU_TIMELINE)
    directions, unlinked_memcpy = _memcpy_directions(db, ctx.trace_id)
    metrics = _metrics(tl, directions, unlinked_memcpy, query_rows(db, COLLECTIVES_SQL, [ctx.trace_id]))
    hideable_us = 1000.0 * _hideable_comm_ms(tl) if metrics.overlap_flagged else 0.0
    claims = Claims(copies=_claimed_copies(db, ctx.trace_id), **_claimed_comm(db, ctx.trace_id, hideable_us))
    metrics.collective_model = _collective_model(db, ctx.trace_id, claims.unhideable_comm)
    found = findings(metrics, ctx, claims, collective_waiting(db, ctx.trace_id))
    metrics.patterns_detected = [f.finding_id.split(":", 1)[1] for f in found]
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="OK",
                       metrics=metrics.model_dump(mode="json"), findings=found)
