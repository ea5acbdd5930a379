"""The ops a compute agent analyzes, read from the marts: each op signature of the trace
(compute_ops) with its kernel mix (op_signature_kernels) as an OpRecord, the comparison with a second
trace in the comparative scope, the re-labelling of `other` ops by their kernels, and the GPU
events a finding claims (compute_claimable_kernels)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.comparison import SignatureMatch, signature_matches
from tracelake.analyzers.compute_records import ComputeAgent, KernelShare, OpRecord
from tracelake.analyzers.compute_text import compact_shape, format_args, parse_json_object
from tracelake.analyzers.contracts import AnalysisContext

RELABEL_SOURCE_CATEGORIES = ("other",)  # SPEC §5: ops labelled `other` whose kernels the taxonomy ...
# ... whose kernels are mostly of a kernel category with takes_other_ops in the agent_categories seed
TOP_KERNELS_PER_OP = 5  # kernels kept per op record (most time first)


def claimed_kernels(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, signature_keys: Sequence[str]) -> dict[int, float]:
    """event_idx -> dur_us of every GPU event the signatures' instances own, copies and fills left
    to the transfer findings."""
    rows = db.execute(
        "select event_idx, any_value(dur_us) from compute_claimable_kernels "
        "where trace_id = ? and platform = ? and list_contains(?, signature_key) group by event_idx",
        [ctx.trace_id, ctx.platform, list(signature_keys)]).fetchall()
    return {int(idx): float(dur) for idx, dur in rows}


def load_platform_peaks(db: duckdb.DuckDBPyConnection, platform: str) -> tuple[dict[str, float], float | None]:
    """(compute_spec -> peak TFLOPS, HBM peak TB/s) of the platform, from the seeds."""
    peaks = {spec: tflops for spec, tflops in db.execute(
        "select compute_spec, peak_tflops from platform_peaks where platform = ?", [platform]
    ).fetchall()}
    row = db.execute("select mem_bw_gbps / 1000.0 from platforms where platform = ?", [platform]).fetchone()
    return peaks, (row[0] if row else None)


def load_op_rows(
    db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, categories: Sequence[str] | None
) -> list[OpRecord]:
    """The trace's op_perf rows on ctx.platform for `categories` (None: every category), largest
    kernel time first, with their kernels' library and taxonomy categories."""
    rows = _read_op_rows(db, ctx, categories)
    kernel_mix = _read_kernel_mix(db, ctx) if rows else {}
    records = [_op_record(row, kernel_mix.get(row["signature_key"], []), ctx.e2e_time_ms) for row in rows]
    fused = _read_fused_steps(db, ctx) if rows else {}
    best = _read_best_observed(db, ctx) if rows else {}
    for record in records:
        record.fused_steps = fused.get(record.signature_key, [])
        record.best_observed_percent, record.best_observed_trace = best.get(record.signature_key, (None, None))
    if ctx.comparison_scope == "comparative" and ctx.trace2_id:
        _apply_comparison(records, signature_matches(
            db, ctx.trace_id, ctx.platform, ctx.trace2_id, ctx.platform2 or ctx.platform))
    return records


def _read_op_rows(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext,
                  categories: Sequence[str] | None) -> list[dict[str, Any]]:
    cursor = db.execute("select * from compute_ops where trace_id = ? and platform = ? "
                        "order by kernel_time_sum_us desc, signature_key", [ctx.trace_id, ctx.platform])
    columns = [d[0] for d in cursor.description]
    rows = [dict(zip(columns, r)) for r in cursor.fetchall()]
    if categories is None:
        return rows
    wanted = set(categories)
    return [row for row in rows if row["op_category"] in wanted]


def _read_fused_steps(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> dict[str, list[str]]:
    """signature_key -> the steps the op already runs in one kernel (op_fused_steps)."""
    rows = db.execute(
        "select signature_key, fused_step from op_fused_steps where trace_id = ? and platform = ? "
        "order by signature_key, rule_order", [ctx.trace_id, ctx.platform]).fetchall()
    steps: dict[str, list[str]] = defaultdict(list)
    for key, step in rows:
        steps[key].append(step)
    return steps


def _read_best_observed(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> dict[str, tuple[float, str]]:
    """signature_key -> (best efficiency %, trace name) where the same op ran faster on this
    platform in another trace of the warehouse (op_best_observed)."""
    rows = db.execute(
        "select signature_key, best_efficiency_percent, best_trace_name from op_best_observed "
        "where trace_id = ? and platform = ?", [ctx.trace_id, ctx.platform]).fetchall()
    return {key: (float(percent), str(name)) for key, percent, name in rows}


def _read_kernel_mix(db: duckdb.DuckDBPyConnection, ctx: AnalysisContext) -> dict[str, list[tuple[KernelShare, bool]]]:
    """signature_key -> (kernel, whether it only changes the data layout), most time first."""
    rows = db.execute(
        "select signature_key, kernel_name, kernel_category, kernel_type, library, kernel_precision, kernel_count, "
        "time_us, is_layout_kernel from op_signature_kernels where trace_id = ? and platform = ? "
        "order by signature_key, time_us desc, kernel_name", [ctx.trace_id, ctx.platform]).fetchall()
    mix: dict[str, list[tuple[KernelShare, bool]]] = defaultdict(list)
    for key, name, kcat, ktype, library, precision, count, time_us, is_layout in rows:
        mix[key].append((KernelShare(
            name=name, kernel_category=kcat, kernel_type=ktype, library=library,
            kernel_precision=precision, count=count, time_us=time_us or 0.0,
        ), bool(is_layout)))
    return mix


def _op_record(row: dict[str, Any], mix: list[tuple[KernelShare, bool]], e2e: float) -> OpRecord:
    kernels = [kernel for kernel, _ in mix]
    total_kernel_us = sum(k.time_us for k in kernels)
    shares: dict[str, float] = defaultdict(float)
    for k in kernels:
        if total_kernel_us > 0:
            shares[k.kernel_category] += k.time_us / total_kernel_us
    precisions = [k.kernel_precision for k in kernels if k.kernel_precision]
    time_ms = (row["kernel_time_sum_us"] or 0.0) / 1000.0
    return OpRecord(
        signature_key=row["signature_key"],
        name=row["name"],
        op_category=row["op_category"],
        input_dims=row["input_dims"] or "",
        input_type=row["input_type"] or "",
        input_strides=row["input_strides"] or "",
        concrete_inputs=row["concrete_inputs"] or "",
        args=format_args(row["input_dims"] or "", row["input_type"] or ""),
        shape=compact_shape(row["input_dims"] or ""),
        count=int(row["operation_count"] or 0),
        time_ms=time_ms,
        mean_us=row["kernel_time_mean_us"] or 0.0,
        percent_of_e2e=time_ms / e2e * 100.0 if e2e > 0 else 0.0,
        has_perf_model=bool(row["has_perf_model"]),
        efficiency_percent=row["pct_roofline_mean"],
        roofline_percent=row["pct_roofline_mean"],
        bound=row["bound"],
        gflops=row["gflops"],
        data_moved_mib=row["data_moved_mib"],
        flops_per_byte=row["flops_per_byte"],
        tflops_per_s=row["tflops_per_s_mean"],
        tb_per_s=row["tb_per_s_mean"],
        compute_spec=row["compute_spec"],
        peak_tflops=row["peak_tflops"],
        peak_tb_per_s=row["peak_tb_per_s"],
        roofline_time_us=row["roofline_time_us"],
        perf_params=parse_json_object(row["perf_params"]),
        module_chain=list(row["module_chain"] or []),
        example_op_id=row["example_op_id"],
        library=row["library"],
        kernel_precision=max(set(precisions), key=precisions.count) if precisions else None,
        kernels=kernels[:TOP_KERNELS_PER_OP],
        kernel_count=row["kernel_count"],
        kernel_category_shares=dict(shares),
        layout_kernel_time_us=sum(kernel.time_us for kernel, is_layout in mix if is_layout),
    )


def _apply_comparison(records: list[OpRecord], matches: dict[str, SignatureMatch]) -> None:
    """Comparative scope: each op's efficiency becomes 100 x t2 / t1, raised to its roofline value
    when lower (TraceLens' roofline cap); unmatched ops have none."""
    for record in records:
        match = matches.get(record.signature_key)
        record.comparison = match
        efficiency = match.efficiency_percent if match is not None else None
        if efficiency is not None and record.roofline_percent is not None and efficiency < record.roofline_percent:
            efficiency, record.efficiency_capped = record.roofline_percent, True
        record.efficiency_percent = efficiency


def dominant_kernel_category(op: OpRecord) -> tuple[str, float] | None:
    """The taxonomy category of most of the op's kernel time, and its share."""
    if not op.kernel_category_shares:
        return None
    category = max(op.kernel_category_shares, key=op.kernel_category_shares.__getitem__)
    return category, op.kernel_category_shares[category]


def relabel_target(op: OpRecord, relabel_agents: dict[str, str]) -> str | None:
    """The agent an op labelled `other` belongs to when most of its kernel time is of a kernel
    category that agent takes `other` ops of (GEMM, attention), else None."""
    if op.op_category not in RELABEL_SOURCE_CATEGORIES:
        return None
    for kernel_category, agent in relabel_agents.items():
        if op.kernel_category_shares.get(kernel_category, 0.0) > settings.RELABEL_MIN_KERNEL_SHARE:
            return agent
    return None


def load_agent_ops(
    db: duckdb.DuckDBPyConnection, ctx: AnalysisContext, agent: ComputeAgent
) -> tuple[list[OpRecord], list[OpRecord]]:
    """(the ops `agent` owns, the ops it hands to another agent). An agent owns its categories
    (agent_categories seed) plus the re-labelled `other` ops meant for it; the generic agent owns
    every category no other agent owns, minus the re-labelled ops (which it hands off)."""
    owners = load_agent_categories(db)
    takes_relabelled = agent.name in owners.relabel_agents.values()
    owned = owners.owned_by(agent.name)
    if agent.owns_the_rest:
        candidates = [op for op in load_op_rows(db, ctx, None) if op.op_category not in owners.owned]
    else:
        wanted = list(owned) + (list(RELABEL_SOURCE_CATEGORIES) if takes_relabelled else [])
        candidates = load_op_rows(db, ctx, wanted)
    ops, handed_off = [], []
    for op in candidates:
        dominant = dominant_kernel_category(op)
        if dominant is not None and dominant[0] in owners.system_kernel_categories:
            continue  # a copy or fill: the transfer findings' (multi_kernel), never a compute op
        op.dominant_kernel_agent = owners.kernel_agents.get(dominant[0]) if dominant else None
        target = relabel_target(op, owners.relabel_agents)
        if agent.owns_the_rest:
            if target is None:
                ops.append(op)
            else:
                handed_off.append(op.model_copy(update={"analyzed_as": target, "relabelled_from": op.op_category}))
        elif op.op_category in owned:
            ops.append(op)
        elif target == agent.name:
            ops.append(op.model_copy(update={"relabelled_from": op.op_category}))
    for op in ops:
        op.analyzed_as = agent.name
    return ops, handed_off
