"""How much time tuning an op could recover (the TraceLens impact ladder, in % of E2E) and how
the estimates group into P-items.

- quantified (the op has a perf model and a roofline): gap = max(0, 1 - efficiency / attainable);
  impact_{low,mid,high} = {0.75, 0.875, 1.0} x gap x op time / E2E x 100; an op whose high
  estimate is under MIN_OP_IMPACT_HIGH is dropped, and none recovers its time below the kernel floor.
- heuristic (no perf model): impact_{low,mid,high} = {0.15, 0.30, 0.45} x op % of E2E.
- latency-bound ops (OpRecord.is_latency_bound): only what fusing them into a neighbour saves, one
  kernel floor (KERNEL_TIME_FLOOR_US) per kernel, at 75 / 87.5 / 100 %.
- P-items: quantified estimates grouped by (bound, library, efficiency bucket, op family),
  heuristic ones by op name (synthetic ops by kernel type); a group whose summed mid estimate is
  under MIN_PITEM_IMPACT_SCORE is dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from tracelake.analyzers import settings
from tracelake.analyzers.compute_records import SYNTHETIC_SUFFIX, EffBucket, Impact, OpGroup, OpRecord
from tracelake.analyzers.contracts import AnalysisContext


def efficiency_bucket(efficiency_percent: float | None) -> EffBucket:
    """TraceLens buckets: below 30, below 60, else 60-100; None -> unknown."""
    if efficiency_percent is None:
        return "unknown"
    low, high = settings.EFFICIENCY_BUCKETS
    if efficiency_percent < low:
        return "0-30"
    if efficiency_percent < high:
        return "30-60"
    return "60-100"


def quantified_impact(time_ms: float, e2e_ms: float, efficiency_percent: float,
                      attainable_percent: float = 100.0) -> Impact:
    """Gap to the attainable share of the roofline x op share of E2E, in % of E2E, at 75 / 87.5 /
    100 % of the gap closed (TraceLens closes the gap to 100 %; nothing runs at 100 % of peak)."""
    gap = max(0.0, 1.0 - efficiency_percent / attainable_percent)
    share = time_ms / e2e_ms * 100.0
    return Impact(
        method="quantified",
        low=settings.TARGET_LOW * gap * share,
        mid=settings.TARGET_MID * gap * share,
        high=settings.TARGET_HIGH * gap * share,
    )


def heuristic_impact(percent_of_e2e: float) -> Impact:
    """An unmodeled op: 15 / 30 / 45 % of its share of E2E."""
    return Impact(
        method="heuristic",
        low=settings.HEURISTIC_FRACTION_LOW * percent_of_e2e,
        mid=settings.HEURISTIC_FRACTION_MID * percent_of_e2e,
        high=settings.HEURISTIC_FRACTION_HIGH * percent_of_e2e,
    )


def estimate_op_impact(op: OpRecord, ctx: AnalysisContext) -> Impact | None:
    """The ladder for one op, or None when the op gets no tuning estimate."""
    if op.excluded or op.name in ctx.fusion_flagged_ops or op.time_ms <= 0 or ctx.e2e_time_ms <= 0:
        return None
    if ctx.comparison_scope == "comparative":
        # the measured gap between the traces and nothing else: no heuristic for unmatched ops
        if op.comparison is None or op.efficiency_percent is None or op.efficiency_percent == 100.0:
            return None
        if op.slower_trace == 2:  # trace 2's gap to trace 1: t2 - t1, on the report's E2E (trace 1's)
            time2_ms = op.comparison.time_trace2_ms
            impact = quantified_impact(time2_ms, ctx.e2e_time_ms, 100.0 * op.time_ms / time2_ms)
        else:
            impact = quantified_impact(op.time_ms, ctx.e2e_time_ms, op.efficiency_percent)
        return impact if impact.high >= settings.MIN_OP_IMPACT_HIGH else None
    if op.efficiency_percent is not None and op.has_perf_model:
        if op.is_anomaly or op.is_near_roofline:
            return None
        if op.is_latency_bound:
            impact = fusing_into_neighbour_impact(op, ctx)
            return impact if impact.high >= settings.MIN_OP_IMPACT_HIGH else None
        impact = _above_kernel_floor(
            quantified_impact(op.time_ms, ctx.e2e_time_ms, op.efficiency_percent, op.attainable_percent), op, ctx)
        kept = impact.high > 0 if is_harness(ctx) else impact.high >= settings.MIN_OP_IMPACT_HIGH
        return impact if kept else None
    if op.percent_of_e2e > 0:
        return heuristic_impact(op.percent_of_e2e)
    return None


def fusing_into_neighbour_impact(op: OpRecord, ctx: AnalysisContext) -> Impact:
    """A latency-bound op (OpRecord.is_latency_bound): its roofline gap is fixed cost no tuning
    removes, so it is credited only with what fusing it into a neighbouring kernel saves, one
    kernel's fixed cost (settings.KERNEL_TIME_FLOOR_US) per kernel, never more than its time."""
    kernels = op.kernel_count or sum(k.count for k in op.kernels)
    high = 100.0 * min(op.time_ms, kernels * settings.KERNEL_TIME_FLOOR_US / 1000.0) / ctx.e2e_time_ms
    return Impact(method="quantified", low=settings.TARGET_LOW * high, mid=settings.TARGET_MID * high,
                  high=settings.TARGET_HIGH * high)


def _above_kernel_floor(impact: Impact, op: OpRecord, ctx: AnalysisContext) -> Impact:
    """No kernel gets faster than settings.KERNEL_TIME_FLOOR_US: an op of many tiny kernels cannot
    recover more than its time above that floor, whatever its distance to the roofline."""
    kernels = op.kernel_count or sum(k.count for k in op.kernels)
    cap = 100.0 * max(0.0, op.time_ms - kernels * settings.KERNEL_TIME_FLOOR_US / 1000.0) / ctx.e2e_time_ms
    if impact.high <= cap:
        return impact
    scale = cap / impact.high if impact.high > 0 else 0.0
    return Impact(method=impact.method, low=impact.low * scale, mid=impact.mid * scale, high=cap)


def sum_impacts(impacts: Sequence[Impact]) -> Impact:
    return Impact(
        method=impacts[0].method,
        low=sum(i.low for i in impacts),
        mid=sum(i.mid for i in impacts),
        high=sum(i.high for i in impacts),
    )


def heuristic_group_name(op: OpRecord) -> str:
    """Heuristic estimates group by op name (one op over several shapes); synthetic ops, whose
    names carry the kernel name, group by the kernel type instead."""
    if op.name.endswith(SYNTHETIC_SUFFIX):
        kernel_type = op.kernels[0].kernel_type if op.kernels else "unknown"
        return f"launched outside any op ({kernel_type} kernels)"
    return op.name


def is_harness(ctx: AnalysisContext) -> bool:
    """A micro-benchmark or test harness (trace_quality's gpu_busy_share warns): its E2E is the
    harness's window, so the %-of-E2E floors would hide every kernel it ran; its kernel findings are
    kept and stated without a time claim (agents/trace_scope.py)."""
    return ctx.quality_verdicts.get("gpu_busy_share") in ("warn", "fail")


def pitem_floor(ctx: AnalysisContext) -> float:
    """The smallest mid impact (% of E2E) a grouped finding needs; none in a harness."""
    return 0.0 if is_harness(ctx) else settings.MIN_PITEM_IMPACT_SCORE


def group_ops(ops: Sequence[OpRecord], family: Callable[[OpRecord], str],
              comparative: bool = False, floor: float = settings.MIN_PITEM_IMPACT_SCORE,
              ) -> tuple[list[OpGroup], list[OpGroup]]:
    """P-items from ops that carry an impact: (kept groups, dropped groups), highest mid first.
    Comparative groups do not split by efficiency bucket (TraceLens: bucket "all")."""
    keyed: dict[tuple[str, ...], list[OpRecord]] = defaultdict(list)
    for op in ops:
        if op.impact is None:
            continue
        key: tuple[str, ...]
        if op.impact.method == "quantified":
            # comparative: one bucket per slower trace (TraceLens has only "all": trace 1's gaps)
            bucket = ("all" if op.slower_trace == 1 else "trace2-slower") if comparative else efficiency_bucket(
                op.efficiency_percent)
            # latency-bound ops group apart: their lever (fusing into a neighbour) is not tuning
            bound = "latency" if op.is_latency_bound else (op.bound or "unknown")
            key = ("quantified", bound, op.library, bucket, family(op))
        else:
            key = ("heuristic", "unmodeled", op.library, "unknown", heuristic_group_name(op))
        keyed[key].append(op)
    groups = []
    for (method, bound, library, bucket, fam), members in keyed.items():
        members = sorted(members, key=lambda o: (-(o.impact.mid if o.impact else 0.0), -o.time_ms))
        groups.append(OpGroup(
            bound=bound, library=library, bucket=bucket, family=fam,
            estimate_method=method,  # type: ignore[arg-type]
            members=members, impact=sum_impacts([m.impact for m in members if m.impact]),
            comparative=comparative and method == "quantified",
        ))
    groups.sort(key=lambda g: (-g.impact.mid, -g.time_ms))
    def reported(g: OpGroup) -> bool:  # the floor lifts only for what the roofline quantifies
        least = floor if g.estimate_method == "quantified" else settings.MIN_PITEM_IMPACT_SCORE
        return g.impact.mid > 0 and g.impact.mid >= least

    return [g for g in groups if reported(g)], [g for g in groups if not reported(g)]
