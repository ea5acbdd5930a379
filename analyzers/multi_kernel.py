"""Multi-kernel analyzer (system tier): memory copies by direction, collectives, and how well
communication hides under computation.

Rules follow TraceLens' multi-kernel analyzer (host<->device copy directions flagged above 5 % of
E2E or 10 transfers; exposed communication above 5 % of E2E; communication/computation overlap
below 70 % when there is at least 100 us of communication). Unlike TraceLens, the findings are
quantified: the exposed time that could hide under idle computation (communication) or that is
not overlapped at all (copies), times a low / mid / high recovery fraction.

Every time here is over GPU events linked to a host launch, the scope of `gpu_timeline`. Copies
come from the `gpu_transfers` mart and each collective's exposed time from `gpu_event_exposure`;
a finding claims the GPU events its impact rests on (`claimed_kernels`: the copies' exposed time,
or the collectives' exposed time split in start order between the part free computation can hide
and the rest), and its impact is computed from their sum.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Literal, NamedTuple

import duckdb
from pydantic import BaseModel

from tracelake.analyzers import settings
from tracelake.analyzers.common import (
    NO_GPU_TIMELINE,
    confidence_from_quality,
    gpu_timeline_row,
    inline_trace_id,
    no_data_result,
    query_rows,
)
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Finding

AGENT_NAME = "multi_kernel"
TIER = "system"


MemcpyDirection = Literal["D2H", "H2D", "D2D", "other"]
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


# ---- SQL --------------------------------------------------------------------------------------

TIMELINE_SQL = """
with params as (select ?::varchar as trace_id)
select total_time_ms, computation_time_ms, total_comm_time_ms, exposed_comm_time_ms, exposed_comm_time_percent,
    total_memcpy_time_ms, exposed_memcpy_time_ms, exposed_memcpy_time_percent
from gpu_timeline, params
where gpu_timeline.trace_id = params.trace_id"""

# Per direction: the copies of gpu_transfers (direction from the event name or `kind` arg) and the
# part of each no computation or communication kernel hides (gpu_transfers.exposed_us).
_COPIES_CTE = """
with params as (select ?::varchar as trace_id),
copies as (
    select
        gpu_transfers.event_idx,
        gpu_transfers.dur_us,
        gpu_transfers.exposed_us,
        gpu_transfers.bytes,
        gpu_transfers.is_linked,
        gpu_transfers.host_memory,
        case gpu_transfers.direction
            when 'DtoH' then 'D2H' when 'HtoD' then 'H2D' when 'DtoD' then 'D2D' else 'other'
        end as direction
    from gpu_transfers, params
    where gpu_transfers.trace_id = params.trace_id and gpu_transfers.transfer_kind = 'memcpy'
)"""

MEMCPY_SQL = _COPIES_CTE + """
select
    direction,
    count(*) filter (where is_linked) as count,
    coalesce(sum(dur_us) filter (where is_linked), 0) / 1000 as total_time_ms,
    coalesce(sum(exposed_us) filter (where is_linked), 0) / 1000 as exposed_time_ms,
    avg(dur_us) filter (where is_linked) as avg_time_us,
    max(dur_us) filter (where is_linked) as max_time_us,
    sum(bytes) filter (where is_linked) as total_bytes,
    avg(bytes) filter (where is_linked) as avg_bytes,
    sum(bytes) filter (where is_linked) / nullif(sum(dur_us) filter (where is_linked and bytes is not null), 0) / 1000
        as achieved_gb_per_s,
    count(*) filter (where is_linked and host_memory = 'pageable') as pageable_count,
    coalesce(sum(dur_us) filter (where is_linked and host_memory = 'pageable'), 0) / 1000 as pageable_time_ms,
    sum(bytes) filter (where is_linked and host_memory = 'pageable') as pageable_bytes,
    coalesce(sum(exposed_us) filter (where is_linked and host_memory = 'pageable'), 0) / 1000 as pageable_exposed_ms,
    count(*) filter (where is_linked and host_memory = 'pinned') as pinned_count,
    count(*) filter (where not is_linked) as unlinked_count
from copies
group by direction
order by direction"""

# The copies a direction's finding rests on: each linked copy's exposed time.
CLAIMED_COPIES_SQL = _COPIES_CTE + """
select direction, event_idx, exposed_us
from copies
where is_linked and exposed_us > 0
order by direction, event_idx"""

# Each collective's exposed time (gpu_event_exposure: per trace these add up to gpu_timeline's
# exposed communication), split in start order between the part free computation can hide (the
# first `hideable_us`) and the rest. The collective across that line counts in the overlap
# finding only (each GPU event in one finding: the claims ledger), for the part it can hide.
CLAIMED_COMM_SQL = """
with params as (select ?::varchar as trace_id, ?::double as hideable_us),
exposed_comm as (
    select
        gpu_event_exposure.event_idx,
        gpu_event_exposure.exposed_us,
        coalesce(sum(gpu_event_exposure.exposed_us) over (
            order by gpu_event_exposure.ts_us, gpu_event_exposure.event_idx
            rows between unbounded preceding and 1 preceding
        ), 0) as exposed_before_us
    from gpu_event_exposure, params
    where gpu_event_exposure.trace_id = params.trace_id
      and gpu_event_exposure.gpu_bucket = 'communication'
      and gpu_event_exposure.exposed_us > 0
),
split as (
    select event_idx, exposed_us,
        least(exposed_us, greatest(params.hideable_us - exposed_before_us, 0)) as hideable_us
    from exposed_comm, params
)
select event_idx, hideable_us, exposed_us - hideable_us as unhideable_us
from split
order by event_idx"""

COLLECTIVES_SQL = """
with params as (select ?::varchar as trace_id)
select kernels.name, kernels.is_linked, any_value(kernels.library) as library, count(*) as count,
    sum(kernels.dur_us) / 1000 as total_time_ms, avg(kernels.dur_us) as avg_time_us
from kernels, params
where kernels.trace_id = params.trace_id and kernels.is_comm
group by kernels.name, kernels.is_linked
order by total_time_ms desc, kernels.name"""





COLLECTIVE_ROWS_SQL = """
select event_idx, collective_name, bytes, dur_us, bus_factor, bus_gb_per_s
from collectives
where trace_id = ? and bytes is not null and dur_us > 0
order by ts_us, event_idx"""


def _collective_model(db: duckdb.DuckDBPyConnection, trace_id: str,
                      unhideable: dict[int, float]) -> CollectiveModel | None:
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


class Claims(NamedTuple):
    """The GPU events (kernels.event_idx -> µs) each finding would rest on."""
    copies: dict[str, dict[int, float]]  # direction -> each linked copy's exposed time
    hideable_comm: dict[int, float]  # the exposed collective time free computation can hide
    unhideable_comm: dict[int, float]  # the rest of the exposed collective time


def _claimed_copies(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, dict[int, float]]:
    claims: dict[str, dict[int, float]] = {d: {} for d in ("D2H", "H2D", "D2D", "other")}
    for direction, event_idx, exposed_us in db.execute(CLAIMED_COPIES_SQL, [trace_id]).fetchall():
        claims[direction][int(event_idx)] = float(exposed_us)
    return claims


def _straddle_clause(m: MultiKernelMetrics, unhideable_ms: float) -> str:
    """The rest of the collective the overlap finding claims: exposed time this finding leaves
    out, so that each GPU event counts in one finding."""
    left_out = (m.exposed_comm_time_ms or 0.0) - (m.hideable_comm_time_ms if m.overlap_flagged else 0.0) - unhideable_ms
    return (f" (not counting {left_out:.2f} ms of the collective the overlap finding claims)"
            if left_out > 0.005 else "")


def _claimed_comm(db: duckdb.DuckDBPyConnection, trace_id: str, hideable_us: float) -> dict[str, dict[int, float]]:
    rows = db.execute(CLAIMED_COMM_SQL, [trace_id, hideable_us]).fetchall()
    return {"hideable_comm": {int(idx): float(h) for idx, h, _ in rows if h > 0},
            "unhideable_comm": {int(idx): float(u) for idx, h, u in rows if u > 0 and h == 0}}


def _slow_collective_advice(model: CollectiveModel | None, latency_bound: bool) -> tuple[str, str]:
    """(action, reason) for exposed collectives overlap cannot hide, from what the collective model
    (None: no model applies) says about them."""
    if model is not None and model.waiting_dominated:
        return (("Find what the collectives wait for: compare this step across ranks (the slowest rank sets "
                 "every all-reduce), balance the per-rank work, and start each gradient bucket's collective as "
                 "soon as it is ready so the wait overlaps the backward pass."),
                ("their time barely grows with their bytes: a collective waits until every rank has joined, so the "
                 "slowest rank's lag, not the link, sets it"))
    if model is not None and model.bus_gb_per_s_max < model.floor_gb_per_s:
        return (("Check the collective transport: at this bus bandwidth the library is not using the GPU "
                 "interconnect (NCCL_DEBUG=INFO / RCCL_DEBUG shows the transport and topology); then reduce "
                 "the bytes (narrower gradient dtype)."),
                f"they move data below the {model.floor_gb_per_s:g} GB/s any GPU link sustains")
    if latency_bound:
        return ("Fuse the many small collectives into fewer, larger ones (larger communication buckets).",
                "per-call latency dominates many small collectives")
    return (("Reduce the bytes each collective moves: communicate in a narrower data type (compressed "
             "collective communication)."), "the transferred volume dominates: few long collectives")


def _collective_sentence(model: CollectiveModel | None) -> str:
    if model is None:
        return ""
    names = "/".join(model.collective_names) or "collective"
    sentence = (f" The {model.modeled_count} exposed {names} kernels move "
                f"{model.bytes_min / 1e6:,.1f}-{model.bytes_max / 1e6:,.1f} MB at "
                f"{model.bus_gb_per_s_min:.1f}-{model.bus_gb_per_s_max:.1f} GB/s bus bandwidth"
                + (f", below the {model.floor_gb_per_s:g} GB/s any GPU link sustains" if model.bus_gb_per_s_max <
                   model.floor_gb_per_s else "") + ".")
    if model.size_scaling is not None and model.waiting_dominated:
        bytes_ratio, time_ratio = model.size_scaling
        sentence += (f" {bytes_ratio:.1f}x the bytes take only {time_ratio:.1f}x the time: the kernels mostly wait "
                     "for the other ranks to arrive, they do not move data.")
    return sentence


def _pinned_copy_model(stats: TransferStats, exposed_ms: float) -> tuple[float, float] | None:
    """(low, high) ms a mostly pageable direction's exposed copies recover: low, its pageable copies
    from pinned memory at the link floor (their exposed share of the time above that); high, all of
    the exposed time (pinned and non-blocking, the copies overlap computation). None when pageable
    copies do not hold most of the time or say no bytes."""
    if not stats.mostly_pageable or not stats.pageable_bytes or exposed_ms <= 0:
        return None
    pinned_ms = stats.pageable_bytes / (settings.LINK_FLOOR_GBPS * 1e6)
    low = stats.pageable_exposed_ms * max(0.0, 1.0 - pinned_ms / stats.pageable_time_ms)
    return min(low, exposed_ms), exposed_ms


def _transfer_facts(stats: TransferStats) -> str:
    """What the copies moved and how fast, and whose host memory, where the trace says."""
    parts = []
    if stats.total_bytes:
        parts.append(f"{stats.total_bytes / 1e6:,.1f} MB"
                     + (f" at {stats.achieved_gb_per_s:.1f} GB/s" if stats.achieved_gb_per_s else ""))
    if stats.pageable_count:
        parts.append(f"{stats.pageable_count} of {stats.count} from pageable host memory")
    elif stats.pinned_count:
        parts.append(f"{stats.pinned_count} of {stats.count} from pinned host memory")
    return f" ({', '.join(parts)})" if parts else ""


def _claimed_ms(claimed: dict[int, float]) -> float:
    """The GPU time (ms) a finding's impact is computed from: the sum of its claims."""
    return sum(claimed.values()) / 1000.0


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)



def analyze(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> AgentResult:
    """Memcpy, collective and overlap issues for one trace."""
    tl = gpu_timeline_row(db, TIMELINE_SQL, ctx.trace_id)
    if tl is None:
        return no_data_result(AGENT_NAME, "system", NO_GPU_TIMELINE)
    e2e_ms = float(tl["total_time_ms"])

    directions: dict[str, TransferStats] = {d: TransferStats() for d in ("D2H", "H2D", "D2D", "other")}
    unlinked_memcpy = 0
    for row in query_rows(db, MEMCPY_SQL, [ctx.trace_id]):
        unlinked_memcpy += int(row["unlinked_count"])
        if not row["count"]:
            continue
        stats = TransferStats(
            count=int(row["count"]), total_time_ms=_round(row["total_time_ms"]),
            exposed_time_ms=_round(row["exposed_time_ms"]), avg_time_us=_round(row["avg_time_us"], 3),
            max_time_us=_round(row["max_time_us"], 3),
            total_bytes=None if row["total_bytes"] is None else int(row["total_bytes"]),
            avg_bytes=_round(row["avg_bytes"], 1),
            percent_of_total=_round(100.0 * row["total_time_ms"] / e2e_ms, 3),
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
            if 100.0 * stats.exposed_time_ms / e2e_ms >= settings.TRANSFER_EXPOSED_PERCENT_MIN:
                stats.flag_reasons.append(f"exposed time >= {settings.TRANSFER_EXPOSED_PERCENT_MIN:g} % of E2E")
            stats.flagged = bool(stats.flag_reasons)
        directions[row["direction"]] = stats

    collectives = query_rows(db, COLLECTIVES_SQL, [ctx.trace_id])
    linked = [r for r in collectives if r["is_linked"]]
    collective_count = sum(int(r["count"]) for r in linked)
    collective_time_ms = sum(float(r["total_time_ms"]) for r in linked)

    total_comm = float(tl["total_comm_time_ms"] or 0.0)
    exposed_comm = float(tl["exposed_comm_time_ms"] or 0.0)
    computation = float(tl["computation_time_ms"] or 0.0)
    overlap_ratio = 1.0 - exposed_comm / total_comm if total_comm > 0 else None
    total_memcpy = float(tl["total_memcpy_time_ms"] or 0.0)
    exposed_memcpy = float(tl["exposed_memcpy_time_ms"] or 0.0)
    # Computation already hiding communication cannot hide more of it.
    hideable = max(0.0, min(exposed_comm, computation - (total_comm - exposed_comm)))

    metrics = MultiKernelMetrics(
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
        top_collectives=[CollectiveOp(name=r["name"], count=int(r["count"]), total_time_ms=_round(r["total_time_ms"]),
                                      avg_time_us=_round(r["avg_time_us"], 3), library=r["library"])
                         for r in linked[:settings.TOP_COLLECTIVES]],
        unlinked_collective_count=sum(int(r["count"]) for r in collectives if not r["is_linked"]),
        unlinked_collective_time_ms=_round(sum(float(r["total_time_ms"]) for r in collectives if not r["is_linked"])),
        total_comm_time_ms=_round(total_comm),
        exposed_comm_time_ms=_round(exposed_comm),
        exposed_comm_percent=_round(tl["exposed_comm_time_percent"] or 0.0, 3),
        exposed_comm_flagged=total_comm > 0 and float(tl["exposed_comm_time_percent"] or 0.0) > settings.EXPOSED_COMM_PERCENT_MAX,
        comm_overlap_ratio=_round(overlap_ratio),
        overlap_flagged=(overlap_ratio is not None and 1000.0 * total_comm >= settings.COMM_OVERLAP_MIN_TOTAL_US
                         and overlap_ratio < settings.COMM_OVERLAP_RATIO_MIN),
        hideable_comm_time_ms=_round(hideable),
        total_memcpy_time_ms=_round(total_memcpy),
        exposed_memcpy_time_ms=_round(exposed_memcpy),
        exposed_memcpy_percent=_round(tl["exposed_memcpy_time_percent"] or 0.0, 3),
        memcpy_overlap_ratio=_round(1.0 - exposed_memcpy / total_memcpy) if total_memcpy > 0 else None,
        patterns_detected=[],
    )
    claims = Claims(copies=_claimed_copies(db, ctx.trace_id),
                    **_claimed_comm(db, ctx.trace_id, 1000.0 * hideable if metrics.overlap_flagged else 0.0))
    metrics.collective_model = _collective_model(db, ctx.trace_id, claims.unhideable_comm)
    findings = _findings(metrics, ctx, claims)
    metrics.patterns_detected = [f.finding_id.split(":", 1)[1] for f in findings]
    return AgentResult(agent=AGENT_NAME, tier="system", category=AGENT_NAME, status="OK",
                       metrics=metrics.model_dump(mode="json"), findings=findings)


# ---- decisions ------------------------------------------------------------------------------


def _ladder(recoverable_ms: float, e2e_ms: float) -> dict:
    share = 100.0 * recoverable_ms / e2e_ms if e2e_ms > 0 else 0.0
    low, mid, high = (round(share * f, 3) for f in settings.OVERLAP_RECOVERY_FRACTIONS)
    return {"impact_low": low, "impact_score": mid, "impact_high": high,
            "recoverable_ms": round(mid * e2e_ms / 100.0, 4), "estimate_method": "heuristic"}


def _finding(slug: str, **fields) -> Finding:
    return Finding(finding_id=f"{AGENT_NAME}:{slug}", agent=AGENT_NAME, tier="system", category=AGENT_NAME, **fields)


def _summary_table(m: MultiKernelMetrics) -> str:
    ratio = "n/a" if m.comm_overlap_ratio is None else f"{100 * m.comm_overlap_ratio:.1f}%"
    rows = [
        "| Metric | Value | Flagged |", "|---|---|---|",
        f"| Total communication (union) | {m.total_comm_time_ms:.3f} ms | false |",
        f"| Exposed communication | {m.exposed_comm_time_ms:.3f} ms ({m.exposed_comm_percent:.1f}%) | "
        f"{str(m.exposed_comm_flagged).lower()} |",
        f"| Compute/communication overlap | {ratio} | {str(m.overlap_flagged).lower()} |",
        f"| Computation | {m.computation_time_ms:.3f} ms | false |",
    ]
    for direction, stats in m.memcpy_by_direction.items():
        if stats.count:
            rows.append(f"| {direction} copies | {stats.count} x, {stats.total_time_ms:.3f} ms "
                        f"({stats.percent_of_total:.2f}%), exposed {stats.exposed_time_ms:.3f} ms | "
                        f"{str(stats.flagged).lower()} |")
    return "\n".join(rows)


def _findings(m: MultiKernelMetrics, ctx: AnalysisContext, claims: Claims) -> list[Finding]:
    findings: list[Finding] = []
    table = _summary_table(m)
    fractions = "/".join(f"{f:.1f}" for f in settings.OVERLAP_RECOVERY_FRACTIONS)
    comm_checks = ("linked_gpu_time_share", "same_stream_overlaps", "distributed_info")
    top = m.top_collectives[0].name if m.top_collectives else "collective kernels"
    comm_evidence = {
        "total_time_ms": m.total_time_ms, "computation_time_ms": m.computation_time_ms,
        "total_comm_time_ms": m.total_comm_time_ms, "exposed_comm_time_ms": m.exposed_comm_time_ms,
        "exposed_comm_percent": m.exposed_comm_percent, "comm_overlap_ratio": m.comm_overlap_ratio,
        "hideable_comm_time_ms": m.hideable_comm_time_ms, "collective_count": m.collective_count,
        "unlinked_collective_count": m.unlinked_collective_count,
        "unlinked_collective_time_ms": m.unlinked_collective_time_ms,
    }
    timeline_sql = inline_trace_id(TIMELINE_SQL, ctx.trace_id)
    unlinked_note = (f" {m.unlinked_collective_count} further collective kernels ({m.unlinked_collective_time_ms:.2f} ms) "
                     f"have no host launch in the trace and are outside these numbers."
                     if m.unlinked_collective_count else "")

    if m.overlap_flagged:
        impact = {**_ladder(_claimed_ms(claims.hideable_comm), ctx.e2e_time_ms),
                  "claimed_kernels": claims.hideable_comm}
        confidence = confidence_from_quality("high", ctx.quality_verdicts, comm_checks)
        if not claims.hideable_comm:
            impact = {"estimate_method": "qualitative"}
            confidence = "low"
        findings.append(_finding(
            "comm-overlap",
            title="Collective communication runs exposed instead of overlapping computation",
            insight=(f"Only {100 * (m.comm_overlap_ratio or 0):.1f} % of the {m.total_comm_time_ms:.2f} ms of collective "
                     f"communication overlaps computation (target {100 * settings.COMM_OVERLAP_RATIO_MIN:.0f} %), so "
                     f"{m.exposed_comm_time_ms:.2f} ms ({m.exposed_comm_percent:.1f} % of E2E) is exposed; "
                     f"{m.hideable_comm_time_ms:.2f} ms of computation is free to hide it."),
            action=("Overlap the collectives with computation: issue them asynchronously as soon as each bucket of "
                    "results is ready (bucketed gradient all-reduce during the backward pass) instead of after it."),
            confidence=confidence,
            evidence={**comm_evidence, "impact_basis_ms": _claimed_ms(claims.hideable_comm)},
            evidence_sql=timeline_sql,
            details=(
                f"**Identification:** {m.collective_count} collective kernels (largest: `{top}`) take "
                f"{m.collective_time_ms:.2f} ms; the GPU runs nothing else during {m.exposed_comm_time_ms:.2f} ms of "
                f"them (source: `multi_kernel_metrics.json` -> `comm_overlap_ratio`, `exposed_comm_time_ms`, "
                f"`hideable_comm_time_ms`).{unlinked_note}\n\n"
                f"**Data:**\n\n{table}\n\n"
                f"**Reasoning for Slowdown:** while a collective is exposed the compute units wait on the network. "
                f"The overlap ratio of {100 * (m.comm_overlap_ratio or 0):.1f} % is below the "
                f"{100 * settings.COMM_OVERLAP_RATIO_MIN:.0f} % target, and {m.hideable_comm_time_ms:.2f} ms of "
                f"computation does not yet run under any communication.\n\n"
                f"**Resolution:** start each collective on its own stream as soon as its input is produced "
                f"(gradient bucketing, asynchronous collectives, prefetching the next layer's parameters), so the "
                f"transfer runs under the remaining computation.\n\n"
                f"**Impact estimate:** hideable = min(exposed communication {m.exposed_comm_time_ms:.3f} ms, "
                f"computation {m.computation_time_ms:.3f} ms - communication already overlapped "
                f"{m.total_comm_time_ms - m.exposed_comm_time_ms:.3f} ms) = {m.hideable_comm_time_ms:.3f} ms; "
                f"recoverable = {fractions} (low/mid/high) x hideable"
                + (f" = {impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E." if impact.get("impact_score")
                   is not None else ": not quantifiable from trace data (no free computation to hide under).")),
            **impact))
    # Exposed communication that overlap cannot hide (no computation left to hide it under) must get
    # cheaper instead: a second mechanism, so a second finding.
    unhideable_ms = _claimed_ms(claims.unhideable_comm)
    unhideable_percent = 100.0 * unhideable_ms / ctx.e2e_time_ms if ctx.e2e_time_ms > 0 else 0.0
    if m.exposed_comm_flagged and unhideable_percent > settings.EXPOSED_COMM_PERCENT_MAX:
        latency_bound = (m.collective_count > settings.MEMCPY_DIRECTION_COUNT_MAX
                         and (m.collective_avg_us or 0) < settings.SMALL_COLLECTIVE_US)
        model = m.collective_model
        modeled = model is not None and model.modeled_share >= settings.COLLECTIVE_MODELED_SHARE_MIN
        if modeled:
            saving = min(model.saving_ms, unhideable_ms)
            share = 100.0 * saving / ctx.e2e_time_ms
            impact = {"impact_low": round(settings.TARGET_LOW * share, 3),
                      "impact_score": round(settings.TARGET_MID * share, 3),
                      "impact_high": round(settings.TARGET_HIGH * share, 3),
                      "recoverable_ms": round(settings.TARGET_MID * saving, 4),
                      "estimate_method": "quantified", "claimed_kernels": claims.unhideable_comm}
        else:
            impact = {"impact_low": round(unhideable_percent * settings.HEURISTIC_FRACTION_LOW, 3),
                      "impact_score": round(unhideable_percent * settings.HEURISTIC_FRACTION_MID, 3),
                      "impact_high": round(unhideable_percent * settings.HEURISTIC_FRACTION_HIGH, 3),
                      "recoverable_ms": round(unhideable_ms * settings.HEURISTIC_FRACTION_MID, 4),
                      "estimate_method": "heuristic", "claimed_kernels": claims.unhideable_comm}
        action, slow_reason = _slow_collective_advice(model if modeled else None, latency_bound)
        context = (f"after hiding {m.hideable_comm_time_ms:.2f} ms under the free computation, "
                   if m.overlap_flagged else
                   f"although {100 * (m.comm_overlap_ratio or 0):.1f} % of communication already overlaps, ")
        findings.append(_finding(
            "exposed-comm",
            title=("Collectives wait far longer than their data takes to move" if modeled and model.waiting_dominated
                   else "Collective communication too slow to hide under computation"),
            insight=(f"{unhideable_ms:.2f} ms of exposed collective communication ({unhideable_percent:.1f} % of E2E) "
                     f"remains {context.rstrip(', ')}{_straddle_clause(m, unhideable_ms)}; {m.collective_count} "
                     f"collectives average {m.collective_avg_us or 0:.1f} us." + _collective_sentence(model)),
            action=action,
            confidence=confidence_from_quality("medium", ctx.quality_verdicts, comm_checks),
            evidence={**comm_evidence, "unhideable_comm_time_ms": round(unhideable_ms, 4), "impact_basis_ms": unhideable_ms,
                      **({"modeled_saving_ms": min(model.saving_ms, unhideable_ms)} if modeled else {})},
            evidence_sql=timeline_sql,
            details=(
                f"**Identification:** exposed communication is {m.exposed_comm_percent:.1f} % of E2E, above the "
                f"{settings.EXPOSED_COMM_PERCENT_MAX:g} % threshold, and {unhideable_ms:.2f} ms of it cannot be "
                f"hidden by overlap alone (source: `multi_kernel_metrics.json` -> `exposed_comm_time_ms`, "
                f"`hideable_comm_time_ms`).{unlinked_note}\n\n"
                f"**Data:**\n\n{table}\n\n"
                f"**Reasoning for Slowdown:** there is not enough computation to hide this communication, so the "
                f"collectives themselves must get cheaper ({slow_reason}).\n\n"
                f"**Resolution:** {action}\n\n"
                f"**Impact estimate:** "
                + (f"each exposed collective's time above what its bytes take at {model.floor_gb_per_s:g} GB/s bus "
                   f"bandwidth (bytes x bus factor / {model.floor_gb_per_s:g} GB/s; {100 * model.modeled_share:.0f} % "
                   f"of the exposed time has its bytes recorded) = {model.saving_ms:.3f} ms, x "
                   f"{settings.TARGET_LOW}/{settings.TARGET_MID}/{settings.TARGET_HIGH} (low/mid/high) = "
                   f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E." if modeled else
                   f"{settings.HEURISTIC_FRACTION_LOW:.2f}/{settings.HEURISTIC_FRACTION_MID:.2f}/"
                   f"{settings.HEURISTIC_FRACTION_HIGH:.2f} (low/mid/high, a heuristic guess for time no model covers) x "
                   f"the unhideable exposed communication {unhideable_percent:.2f} % = "
                   f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E.")),
            **impact))

    memcpy_sql = inline_trace_id(MEMCPY_SQL, ctx.trace_id)
    for direction in FLAGGED_DIRECTIONS:
        stats = m.memcpy_by_direction[direction]
        if not stats.flagged:
            continue
        claimed = claims.copies[direction]
        pinned = _pinned_copy_model(stats, _claimed_ms(claimed))
        if pinned is not None:
            low, high = (100.0 * ms / ctx.e2e_time_ms for ms in pinned)
            impact = {"impact_low": round(low, 3), "impact_score": round((low + high) / 2.0, 3),
                      "impact_high": round(high, 3), "recoverable_ms": round(sum(pinned) / 2.0, 4),
                      "estimate_method": "quantified", "claimed_kernels": claimed}
        else:
            impact = {**_ladder(_claimed_ms(claimed), ctx.e2e_time_ms), "claimed_kernels": claimed}
        confidence = confidence_from_quality("medium", ctx.quality_verdicts, ("linked_gpu_time_share",))
        if impact["impact_score"] < settings.MIN_PITEM_IMPACT_SCORE:
            # Flagged by count only (or fully overlapped): real per-transfer host cost, negligible GPU time.
            impact = {"estimate_method": "qualitative"}
            confidence = "low"
        if direction == "D2H":
            title = "Device-to-host copies in the step"
            action = ("Keep the values on the device and copy them to the host once per step (batched, "
                      "non-blocking) instead of reading them back one at a time.")
            reason = ("each device-to-host read (a scalar read, `.cpu()`, logging) usually forces the host to wait "
                      "for the GPU before it can continue launching")
        elif stats.mostly_pageable:
            title = "Host-to-device copies from pageable memory"
            action = ("Pin the source buffers (`pin_memory=True` in the DataLoader, or `tensor.pin_memory()`) and copy "
                      "with `.to(device, non_blocking=True)` ahead of use, so the copy runs at full link bandwidth and "
                      "overlaps computation" + (", batching the small transfers into one." if stats.count >
                                                 settings.MEMCPY_DIRECTION_COUNT_MAX else "."))
            reason = ("a copy from pageable memory is staged through a driver buffer and cannot overlap kernels, so "
                      "the GPU waits for it; pinned memory lets the copy engine run it asynchronously")
        else:
            title = "Host-to-device copies in the step"
            action = ("Copy inputs asynchronously ahead of use (`non_blocking=True` on a side stream), batching small "
                      "transfers into one.")
            reason = ("copies the GPU waits for delay the kernels that consume them, and many small transfers pay a "
                      "fixed per-copy cost each")
        quantified = impact.get("impact_score") is not None
        findings.append(_finding(
            f"memcpy-{direction.lower()}",
            title=title,
            insight=(f"{stats.count} {direction} copies take {stats.total_time_ms:.3f} ms ({stats.percent_of_total:.2f} % "
                     f"of E2E), {stats.exposed_time_ms:.3f} ms of it exposed" + _transfer_facts(stats)
                     + f"; flagged because {' and '.join(stats.flag_reasons)}."),
            action=action, confidence=confidence,
            evidence={"direction": direction, **stats.model_dump(), "total_time_ms_e2e": m.total_time_ms,
                      **({"impact_basis_ms": _claimed_ms(claimed)} if quantified else {}),
                      **({"modeled_saving_ms": list(pinned)} if pinned is not None and quantified else {})},
            evidence_sql=memcpy_sql,
            details=(
                f"**Identification:** {stats.count} {direction} transfers (average {stats.avg_time_us or 0:.1f} us, "
                f"{stats.avg_bytes or 0:.0f} bytes) (source: `multi_kernel_metrics.json` -> "
                f"`memcpy_by_direction.{direction}`).\n\n"
                f"**Data:**\n\n{table}\n\n"
                f"**Reasoning for Slowdown:** {reason}.\n\n"
                f"**Resolution:** {action}\n\n"
                f"**Impact estimate:** "
                + (f"low = the pageable copies' exposed time {stats.pageable_exposed_ms:.3f} ms x (1 - their time from "
                   f"pinned memory at {settings.LINK_FLOOR_GBPS:g} GB/s, "
                   f"{(stats.pageable_bytes or 0) / (settings.LINK_FLOOR_GBPS * 1e6):.3f} ms, / their measured "
                   f"{stats.pageable_time_ms:.3f} ms): pinning alone; high = all of the exposed copy time "
                   "(pinned and non-blocking, the copy overlaps computation); mid = their mean: "
                   f"{impact['impact_low']:.2f}-{impact['impact_high']:.2f} % of E2E." if pinned is not None and quantified else
                   f"{fractions} (low/mid/high) x the exposed copy time {stats.exposed_time_ms:.3f} ms = "
                   f"{impact['impact_low']:.2f}-{impact['impact_high']:.2f} % of E2E." if quantified else
                   "not quantifiable from trace data: the copies' exposed GPU time is negligible; their cost is "
                   "host-side.")),
            **impact))
    return findings
