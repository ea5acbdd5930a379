"""The multi-kernel agent's findings: collective communication that does not overlap computation,
exposed collectives too slow to hide, and host<->device copies, each with its sentences, evidence
and the GPU events it claims."""

from __future__ import annotations

from typing import Any, NamedTuple

from tracelake.analyzers import settings
from tracelake.analyzers.confidence import confidence_from_quality
from tracelake.analyzers.contracts import AnalysisContext, Confidence, Finding
from tracelake.analyzers.multi_kernel_metrics import (
    AGENT_NAME,
    FLAGGED_DIRECTIONS,
    MEMCPY_SQL,
    TIMELINE_SQL,
    Claims,
    CollectiveModel,
    MultiKernelMetrics,
    TransferStats,
)
from tracelake.analyzers.multi_kernel_waiting import CollectiveWaiting, waiting_finding
from tracelake.core.sql_text import inline_trace_id

COMM_CHECKS = ("linked_gpu_time_share", "same_stream_overlaps", "distributed_info")
COPY_CHECKS = ("linked_gpu_time_share",)

OVERLAP_TITLE = "Collective communication runs exposed instead of overlapping computation"
OVERLAP_ACTION = ("Overlap the collectives with computation: issue them asynchronously as soon as each bucket of "
                  "results is ready (bucketed gradient all-reduce during the backward pass) instead of after it.")
OVERLAP_RESOLUTION = ("start each collective on its own stream as soon as its input is produced (gradient bucketing, "
                      "asynchronous collectives, prefetching the next layer's parameters), so the transfer runs under "
                      "the remaining computation.")
WAITING_TITLE = "Collectives wait far longer than their data takes to move"
SLOW_COMM_TITLE = "Collective communication too slow to hide under computation"
WAITING_ADVICE = (("Find what the collectives wait for: compare this step across ranks (the slowest rank sets every "
                   "all-reduce), balance the per-rank work, and start each gradient bucket's collective as soon as it "
                   "is ready so the wait overlaps the backward pass."),
                  ("their time barely grows with their bytes: a collective waits until every rank has joined, so the "
                   "slowest rank's lag, not the link, sets it"))
TRANSPORT_ACTION = ("Check the collective transport: at this bus bandwidth the library is not using the GPU interconnect "
                    "(NCCL_DEBUG=INFO / RCCL_DEBUG shows the transport and topology); then reduce the bytes (narrower "
                    "gradient dtype).")
LATENCY_ADVICE = ("Fuse the many small collectives into fewer, larger ones (larger communication buckets).",
                  "per-call latency dominates many small collectives")
VOLUME_ADVICE = (("Reduce the bytes each collective moves: communicate in a narrower data type (compressed collective "
                  "communication)."), "the transferred volume dominates: few long collectives")
# (title, action, reason) of a flagged copy direction
D2H_ADVICE = ("Device-to-host copies in the step",
              ("Keep the values on the device and copy them to the host once per step (batched, non-blocking) instead "
               "of reading them back one at a time."),
              ("each device-to-host read (a scalar read, `.cpu()`, logging) usually forces the host to wait for the GPU "
               "before it can continue launching"))
PAGEABLE_H2D_TITLE = "Host-to-device copies from pageable memory"
PAGEABLE_H2D_ACTION = ("Pin the source buffers (`pin_memory=True` in the DataLoader, or `tensor.pin_memory()`) and copy "
                       "with `.to(device, non_blocking=True)` ahead of use, so the copy runs at full link bandwidth and "
                       "overlaps computation")
PAGEABLE_H2D_REASON = ("a copy from pageable memory is staged through a driver buffer and cannot overlap kernels, so the "
                       "GPU waits for it; pinned memory lets the copy engine run it asynchronously")
H2D_ADVICE = ("Host-to-device copies in the step",
              ("Copy inputs asynchronously ahead of use (`non_blocking=True` on a side stream), batching small transfers "
               "into one."),
              ("copies the GPU waits for delay the kernels that consume them, and many small transfers pay a fixed "
               "per-copy cost each"))
HOST_SIDE_IMPACT = ("not quantifiable from trace data: the copies' exposed GPU time is negligible; their cost is "
                    "host-side.")


class _Shared(NamedTuple):
    """What every finding of one trace prints or records alike."""

    table: str  # the markdown summary of the metrics
    fractions: str  # the overlap recovery fractions, low/mid/high
    top: str  # the longest collective kernel
    comm_evidence: dict[str, Any]
    timeline_sql: str
    unlinked_note: str


def claimed_ms(claimed: dict[int, float]) -> float:
    """The GPU time (ms) a finding's impact is computed from: the sum of its claims."""
    return sum(claimed.values()) / 1000.0


def _ladder(recoverable_ms: float, e2e_ms: float) -> dict[str, Any]:
    share = 100.0 * recoverable_ms / e2e_ms if e2e_ms > 0 else 0.0
    low, mid, high = (round(share * f, 3) for f in settings.OVERLAP_RECOVERY_FRACTIONS)
    return {"impact_low": low, "impact_score": mid, "impact_high": high,
            "recoverable_ms": round(mid * e2e_ms / 100.0, 4), "estimate_method": "heuristic"}


def _finding(slug: str, **fields: Any) -> Finding:
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


def _shared(m: MultiKernelMetrics, ctx: AnalysisContext) -> _Shared:
    unlinked_note = (f" {m.unlinked_collective_count} further collective kernels ({m.unlinked_collective_time_ms:.2f} ms) "
                     f"have no host launch in the trace and are outside these numbers."
                     if m.unlinked_collective_count else "")
    return _Shared(
        table=_summary_table(m),
        fractions="/".join(f"{f:.1f}" for f in settings.OVERLAP_RECOVERY_FRACTIONS),
        top=m.top_collectives[0].name if m.top_collectives else "collective kernels",
        comm_evidence={
            "total_time_ms": m.total_time_ms, "computation_time_ms": m.computation_time_ms,
            "total_comm_time_ms": m.total_comm_time_ms, "exposed_comm_time_ms": m.exposed_comm_time_ms,
            "exposed_comm_percent": m.exposed_comm_percent, "comm_overlap_ratio": m.comm_overlap_ratio,
            "hideable_comm_time_ms": m.hideable_comm_time_ms, "collective_count": m.collective_count,
            "unlinked_collective_count": m.unlinked_collective_count,
            "unlinked_collective_time_ms": m.unlinked_collective_time_ms,
        },
        timeline_sql=inline_trace_id(TIMELINE_SQL, ctx.trace_id),
        unlinked_note=unlinked_note)


# ---- collective communication that overlap could hide -------------------------------------------


def _overlap_details(m: MultiKernelMetrics, shared: _Shared, impact: dict[str, Any]) -> str:
    overlap_percent = 100 * (m.comm_overlap_ratio or 0)
    target_percent = 100 * settings.COMM_OVERLAP_RATIO_MIN
    result = (f" = {impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E." if impact.get("impact_score")
              is not None else ": not quantifiable from trace data (no free computation to hide under).")
    return (
        f"**Identification:** {m.collective_count} collective kernels (largest: `{shared.top}`) take "
        f"{m.collective_time_ms:.2f} ms; the GPU runs nothing else during {m.exposed_comm_time_ms:.2f} ms of "
        f"them (source: `multi_kernel_metrics.json` -> `comm_overlap_ratio`, `exposed_comm_time_ms`, "
        f"`hideable_comm_time_ms`).{shared.unlinked_note}\n\n"
        f"**Data:**\n\n{shared.table}\n\n"
        f"**Reasoning for Slowdown:** while a collective is exposed the compute units wait on the network. "
        f"The overlap ratio of {overlap_percent:.1f} % is below the {target_percent:.0f} % target, and "
        f"{m.hideable_comm_time_ms:.2f} ms of computation does not yet run under any communication.\n\n"
        f"**Resolution:** {OVERLAP_RESOLUTION}\n\n"
        f"**Impact estimate:** hideable = min(exposed communication {m.exposed_comm_time_ms:.3f} ms, "
        f"computation {m.computation_time_ms:.3f} ms - communication already overlapped "
        f"{m.total_comm_time_ms - m.exposed_comm_time_ms:.3f} ms) = {m.hideable_comm_time_ms:.3f} ms; "
        f"recoverable = {shared.fractions} (low/mid/high) x hideable" + result)


def _overlap_finding(m: MultiKernelMetrics, ctx: AnalysisContext, claims: Claims, shared: _Shared) -> Finding:
    impact: dict[str, Any] = {**_ladder(claimed_ms(claims.hideable_comm), ctx.e2e_time_ms),
                              "claimed_kernels": claims.hideable_comm}
    confidence = confidence_from_quality("high", ctx.quality_verdicts, COMM_CHECKS)
    if not claims.hideable_comm:
        impact = {"estimate_method": "qualitative"}
        confidence = "low"
    return _finding(
        "comm-overlap",
        title=OVERLAP_TITLE,
        insight=(f"Only {100 * (m.comm_overlap_ratio or 0):.1f} % of the {m.total_comm_time_ms:.2f} ms of collective "
                 f"communication overlaps computation (target {100 * settings.COMM_OVERLAP_RATIO_MIN:.0f} %), so "
                 f"{m.exposed_comm_time_ms:.2f} ms ({m.exposed_comm_percent:.1f} % of E2E) is exposed; "
                 f"{m.hideable_comm_time_ms:.2f} ms of computation is free to hide it."),
        action=OVERLAP_ACTION,
        confidence=confidence,
        evidence={**shared.comm_evidence, "impact_basis_ms": claimed_ms(claims.hideable_comm)},
        evidence_sql=shared.timeline_sql,
        details=_overlap_details(m, shared, impact),
        **impact)


# ---- exposed collective communication overlap cannot hide ---------------------------------------


def _straddle_clause(m: MultiKernelMetrics, unhideable_ms: float) -> str:
    """The rest of the collective the overlap finding claims: exposed time this finding leaves
    out, so that each GPU event counts in one finding."""
    left_out = (m.exposed_comm_time_ms or 0.0) - (m.hideable_comm_time_ms if m.overlap_flagged else 0.0) - unhideable_ms
    return (f" (not counting {left_out:.2f} ms of the collective the overlap finding claims)"
            if left_out > 0.005 else "")


def _slow_collective_advice(model: CollectiveModel | None, latency_bound: bool) -> tuple[str, str]:
    """(action, reason) for exposed collectives overlap cannot hide, from what the collective model
    (None: no model applies) says about them."""
    if model is not None and model.waiting_dominated:
        return WAITING_ADVICE
    if model is not None and model.bus_gb_per_s_max < model.floor_gb_per_s:
        return TRANSPORT_ACTION, f"they move data below the {model.floor_gb_per_s:g} GB/s any GPU link sustains"
    if latency_bound:
        return LATENCY_ADVICE
    return VOLUME_ADVICE


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


def _slow_comm_impact(model: CollectiveModel | None, unhideable_ms: float, unhideable_percent: float,
                      ctx: AnalysisContext, claims: Claims) -> dict[str, Any]:
    """Modeled (`model` given): the collectives' time above the floor bandwidth x the quantified
    ladder; else the unhideable exposed time x the heuristic fractions."""
    if model is not None:
        saving = min(model.saving_ms, unhideable_ms)
        share = 100.0 * saving / ctx.e2e_time_ms
        return {"impact_low": round(settings.TARGET_LOW * share, 3),
                "impact_score": round(settings.TARGET_MID * share, 3),
                "impact_high": round(settings.TARGET_HIGH * share, 3),
                "recoverable_ms": round(settings.TARGET_MID * saving, 4),
                "estimate_method": "quantified", "claimed_kernels": claims.unhideable_comm}
    return {"impact_low": round(unhideable_percent * settings.HEURISTIC_FRACTION_LOW, 3),
            "impact_score": round(unhideable_percent * settings.HEURISTIC_FRACTION_MID, 3),
            "impact_high": round(unhideable_percent * settings.HEURISTIC_FRACTION_HIGH, 3),
            "recoverable_ms": round(unhideable_ms * settings.HEURISTIC_FRACTION_MID, 4),
            "estimate_method": "heuristic", "claimed_kernels": claims.unhideable_comm}


def _slow_comm_method(model: CollectiveModel | None, unhideable_percent: float, impact: dict[str, Any]) -> str:
    result = f"{impact['impact_low']:.1f}-{impact['impact_high']:.1f} % of E2E."
    if model is not None:
        return (f"each exposed collective's time above what its bytes take at {model.floor_gb_per_s:g} GB/s bus "
                f"bandwidth (bytes x bus factor / {model.floor_gb_per_s:g} GB/s; {100 * model.modeled_share:.0f} % "
                f"of the exposed time has its bytes recorded) = {model.saving_ms:.3f} ms, x "
                f"{settings.TARGET_LOW}/{settings.TARGET_MID}/{settings.TARGET_HIGH} (low/mid/high) = " + result)
    return (f"{settings.HEURISTIC_FRACTION_LOW:.2f}/{settings.HEURISTIC_FRACTION_MID:.2f}/"
            f"{settings.HEURISTIC_FRACTION_HIGH:.2f} (low/mid/high, a heuristic guess for time no model covers) x "
            f"the unhideable exposed communication {unhideable_percent:.2f} % = " + result)


def _slow_comm_finding(m: MultiKernelMetrics, ctx: AnalysisContext, claims: Claims, shared: _Shared,
                       unhideable_ms: float, unhideable_percent: float) -> Finding:
    latency_bound = (m.collective_count > settings.MEMCPY_DIRECTION_COUNT_MAX
                     and (m.collective_avg_us or 0) < settings.SMALL_COLLECTIVE_US)
    model = m.collective_model
    modeled = model if model is not None and model.modeled_share >= settings.COLLECTIVE_MODELED_SHARE_MIN else None
    impact = _slow_comm_impact(modeled, unhideable_ms, unhideable_percent, ctx, claims)
    action, slow_reason = _slow_collective_advice(modeled, latency_bound)
    context = (f"after hiding {m.hideable_comm_time_ms:.2f} ms under the free computation, "
               if m.overlap_flagged else
               f"although {100 * (m.comm_overlap_ratio or 0):.1f} % of communication already overlaps, ")
    return _finding(
        "exposed-comm",
        title=WAITING_TITLE if modeled is not None and modeled.waiting_dominated else SLOW_COMM_TITLE,
        insight=(f"{unhideable_ms:.2f} ms of exposed collective communication ({unhideable_percent:.1f} % of E2E) "
                 f"remains {context.rstrip(', ')}{_straddle_clause(m, unhideable_ms)}; {m.collective_count} "
                 f"collectives average {m.collective_avg_us or 0:.1f} us." + _collective_sentence(model)),
        action=action,
        confidence=confidence_from_quality("medium", ctx.quality_verdicts, COMM_CHECKS),
        evidence={**shared.comm_evidence, "unhideable_comm_time_ms": round(unhideable_ms, 4),
                  "impact_basis_ms": unhideable_ms,
                  **({"modeled_saving_ms": min(modeled.saving_ms, unhideable_ms)} if modeled is not None else {})},
        evidence_sql=shared.timeline_sql,
        details=(
            f"**Identification:** exposed communication is {m.exposed_comm_percent:.1f} % of E2E, above the "
            f"{settings.EXPOSED_COMM_PERCENT_MAX:g} % threshold, and {unhideable_ms:.2f} ms of it cannot be "
            f"hidden by overlap alone (source: `multi_kernel_metrics.json` -> `exposed_comm_time_ms`, "
            f"`hideable_comm_time_ms`).{shared.unlinked_note}\n\n"
            f"**Data:**\n\n{shared.table}\n\n"
            f"**Reasoning for Slowdown:** there is not enough computation to hide this communication, so the "
            f"collectives themselves must get cheaper ({slow_reason}).\n\n"
            f"**Resolution:** {action}\n\n"
            f"**Impact estimate:** " + _slow_comm_method(modeled, unhideable_percent, impact)),
        **impact)


# ---- host <-> device copies ---------------------------------------------------------------------


def pinned_copy_model(stats: TransferStats, exposed_ms: float) -> tuple[float, float] | None:
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


def _copy_advice(direction: str, stats: TransferStats) -> tuple[str, str, str]:
    """(title, action, reason) of a flagged copy direction."""
    if direction == "D2H":
        return D2H_ADVICE
    if stats.mostly_pageable:
        batching = ", batching the small transfers into one." if stats.count > settings.MEMCPY_DIRECTION_COUNT_MAX else "."
        return PAGEABLE_H2D_TITLE, PAGEABLE_H2D_ACTION + batching, PAGEABLE_H2D_REASON
    return H2D_ADVICE


def _copy_impact(stats: TransferStats, claimed: dict[int, float], pinned: tuple[float, float] | None,
                 ctx: AnalysisContext) -> tuple[dict[str, Any], Confidence]:
    if pinned is not None:
        low, high = (100.0 * ms / ctx.e2e_time_ms for ms in pinned)
        impact: dict[str, Any] = {"impact_low": round(low, 3), "impact_score": round((low + high) / 2.0, 3),
                                  "impact_high": round(high, 3), "recoverable_ms": round(sum(pinned) / 2.0, 4),
                                  "estimate_method": "quantified", "claimed_kernels": claimed}
    else:
        impact = {**_ladder(claimed_ms(claimed), ctx.e2e_time_ms), "claimed_kernels": claimed}
    confidence = confidence_from_quality("medium", ctx.quality_verdicts, COPY_CHECKS)
    if impact["impact_score"] < settings.MIN_PITEM_IMPACT_SCORE:
        # Flagged by count only (or fully overlapped): real per-transfer host cost, negligible GPU time.
        return {"estimate_method": "qualitative"}, "low"
    return impact, confidence


def _copy_method(stats: TransferStats, pinned: tuple[float, float] | None, impact: dict[str, Any],
                 shared: _Shared) -> str:
    if impact.get("impact_score") is None:
        return HOST_SIDE_IMPACT
    result = f"{impact['impact_low']:.2f}-{impact['impact_high']:.2f} % of E2E."
    if pinned is not None:
        return (f"low = the pageable copies' exposed time {stats.pageable_exposed_ms:.3f} ms x (1 - their time from "
                f"pinned memory at {settings.LINK_FLOOR_GBPS:g} GB/s, "
                f"{(stats.pageable_bytes or 0) / (settings.LINK_FLOOR_GBPS * 1e6):.3f} ms, / their measured "
                f"{stats.pageable_time_ms:.3f} ms): pinning alone; high = all of the exposed copy time "
                "(pinned and non-blocking, the copy overlaps computation); mid = their mean: " + result)
    return f"{shared.fractions} (low/mid/high) x the exposed copy time {stats.exposed_time_ms:.3f} ms = " + result


def _copy_finding(direction: str, m: MultiKernelMetrics, ctx: AnalysisContext, claims: Claims,
                  shared: _Shared) -> Finding:
    stats = m.memcpy_by_direction[direction]
    claimed = claims.copies[direction]
    pinned = pinned_copy_model(stats, claimed_ms(claimed))
    impact, confidence = _copy_impact(stats, claimed, pinned, ctx)
    title, action, reason = _copy_advice(direction, stats)
    quantified = impact.get("impact_score") is not None
    return _finding(
        f"memcpy-{direction.lower()}",
        title=title,
        insight=(f"{stats.count} {direction} copies take {stats.total_time_ms:.3f} ms ({stats.percent_of_total:.2f} % "
                 f"of E2E), {stats.exposed_time_ms:.3f} ms of it exposed" + _transfer_facts(stats)
                 + f"; flagged because {' and '.join(stats.flag_reasons)}."),
        action=action, confidence=confidence,
        evidence={"direction": direction, **stats.model_dump(), "total_time_ms_e2e": m.total_time_ms,
                  **({"impact_basis_ms": claimed_ms(claimed)} if quantified else {}),
                  **({"modeled_saving_ms": list(pinned)} if pinned is not None and quantified else {})},
        evidence_sql=inline_trace_id(MEMCPY_SQL, ctx.trace_id),
        details=(
            f"**Identification:** {stats.count} {direction} transfers (average {stats.avg_time_us or 0:.1f} us, "
            f"{stats.avg_bytes or 0:.0f} bytes) (source: `multi_kernel_metrics.json` -> "
            f"`memcpy_by_direction.{direction}`).\n\n"
            f"**Data:**\n\n{shared.table}\n\n"
            f"**Reasoning for Slowdown:** {reason}.\n\n"
            f"**Resolution:** {action}\n\n"
            f"**Impact estimate:** " + _copy_method(stats, pinned, impact, shared)),
        **impact)


def findings(m: MultiKernelMetrics, ctx: AnalysisContext, claims: Claims,
             waiting: CollectiveWaiting | None = None) -> list[Finding]:
    """The trace's findings, in this order: overlap, exposed communication, D2H and H2D copies. A
    rank of a job whose collective time is mostly waiting for a late rank (`waiting`) gets one
    finding that says so instead of the two communication findings: overlap would not hide it."""
    shared = _shared(m, ctx)
    found: list[Finding] = []
    unhideable_ms = claimed_ms(claims.unhideable_comm)
    unhideable_percent = 100.0 * unhideable_ms / ctx.e2e_time_ms if ctx.e2e_time_ms > 0 else 0.0
    comm_flagged = m.overlap_flagged or (m.exposed_comm_flagged
                                         and unhideable_percent > settings.EXPOSED_COMM_PERCENT_MAX)
    if comm_flagged and waiting is not None and waiting.mostly_waiting:
        found.append(waiting_finding(waiting, AGENT_NAME, ctx.trace_id, m.exposed_comm_time_ms))
    elif m.overlap_flagged:
        found.append(_overlap_finding(m, ctx, claims, shared))
    # Exposed communication that overlap cannot hide (no computation left to hide it under) must get
    # cheaper instead: a second mechanism, so a second finding.
    if m.exposed_comm_flagged and unhideable_percent > settings.EXPOSED_COMM_PERCENT_MAX and not (
            waiting is not None and waiting.mostly_waiting):
        found.append(_slow_comm_finding(m, ctx, claims, shared, unhideable_ms, unhideable_percent))
    found += [_copy_finding(direction, m, ctx, claims, shared)
              for direction in FLAGGED_DIRECTIONS if m.memcpy_by_direction[direction].flagged]
    return found
