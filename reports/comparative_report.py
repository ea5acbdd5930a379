"""What a comparative analysis.md adds: the Top Operations rows with trace 2's side, the note on
how the ops were matched, the bottleneck categories of both traces, and the op comparison as a
CSV table (TraceLens' diff_stats idea). Trace 1 is the baseline, trace 2 the target."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tracelake.analyzers.comparison import CategoryTime, OpComparison
from tracelake.core.markdown_text import code, sql_literal

TOP_OPERATIONS = 10  # rows of the report's Top Operations table
UNMATCHED_LISTED = 5  # unmatched ops named in the report's matching note, per side
OP_COMPARISON_SCHEMA = pa.schema(
    [(name, pa.string()) for name in ("source", "name", "name_trace2", "op_category", "input_dims", "input_type",
                                      "module_path", "matched_by")]
    + [(name, pa.int64()) for name in ("count_trace1", "count_trace2")]
    + [(name, pa.float64()) for name in ("time_trace1_ms", "time_trace2_ms", "difference_ms", "efficiency_percent")])


def op_comparison_table(comparison: OpComparison) -> pa.Table:
    """Every op of both traces in one table (TraceLens' diff_stats idea): matched pairs, then the
    ops only one trace has."""
    rows = [{
        "source": "both", "name": m.name, "name_trace2": m.name_trace2, "op_category": m.op_category,
        "input_dims": m.input_dims, "input_type": m.input_type, "module_path": m.module_path,
        "matched_by": m.matched_by, "count_trace1": m.count_trace1, "count_trace2": m.count_trace2,
        "time_trace1_ms": m.time_trace1_ms, "time_trace2_ms": m.time_trace2_ms,
        "difference_ms": m.difference_ms, "efficiency_percent": m.efficiency_percent,
    } for m in comparison.matched]
    for source, ops in (("trace1", comparison.only_in_trace1), ("trace2", comparison.only_in_trace2)):
        rows += [{
            "source": source, "name": o.name, "name_trace2": o.name if source == "trace2" else None,
            "op_category": o.op_category, "input_dims": o.input_dims, "input_type": o.input_type,
            "module_path": o.module_path, "matched_by": None,
            "count_trace1": o.count if source == "trace1" else None,
            "count_trace2": o.count if source == "trace2" else None,
            "time_trace1_ms": o.time_ms if source == "trace1" else None,
            "time_trace2_ms": o.time_ms if source == "trace2" else None,
            "difference_ms": None, "efficiency_percent": None,
        } for o in ops]
    return pa.Table.from_pylist(rows, schema=OP_COMPARISON_SCHEMA)


def top_operations(comparison: OpComparison, e2e_ms: float) -> list[dict[str, Any]]:
    """The report's Top Operations rows: trace 1's ops by kernel time, with trace 2's side."""
    rows: list[dict[str, Any]] = [{
        "name": m.name if m.name == m.name_trace2 else f"{m.name} / {m.name_trace2}",
        "category": m.op_category, "count": m.count_trace1, "count2": m.count_trace2,
        "time_ms": m.time_trace1_ms, "time2_ms": m.time_trace2_ms,
        "percent_of_e2e": 100.0 * m.time_trace1_ms / e2e_ms if e2e_ms else None,
        "efficiency_percent": m.efficiency_percent, "matched_by": m.matched_by,
    } for m in comparison.matched]
    rows += [{
        "name": o.name, "category": o.op_category, "count": o.count, "count2": None, "time_ms": o.time_ms,
        "time2_ms": None, "percent_of_e2e": 100.0 * o.time_ms / e2e_ms if e2e_ms else None,
        "efficiency_percent": None, "matched_by": None,
    } for o in comparison.only_in_trace1]
    rows.sort(key=lambda r: -(r["time_ms"] or 0.0))
    return rows[:TOP_OPERATIONS]


def matching_note(comparison: OpComparison) -> str:
    """One paragraph of markdown: how much of each trace's op time was matched, what was not."""
    def share(part: float, whole: float) -> str:
        return f"{100.0 * part / whole:.1f} %" if whole > 0 else "0 %"

    by_module = sum(1 for m in comparison.matched if m.matched_by == "module_path")
    parts = [
        "Ops are matched by name, input shapes and dtypes"
        + (f" ({by_module} by model layer where the names differ)" if by_module else "")
        + f": {len(comparison.matched)} matched op(s) cover "
        f"{share(comparison.matched_time_trace1_ms, comparison.time_trace1_ms)} of trace 1's op kernel time and "
        f"{share(comparison.matched_time_trace2_ms, comparison.time_trace2_ms)} of trace 2's. "
        "Slower side: the trace that takes longer for the op and its time over the other's (T2 3.04x slower: "
        "trace 2 takes 3.04 times trace 1's time); a card ranks the gap on the slower side."
    ]
    for label, ops in (("trace 1", comparison.only_in_trace1), ("trace 2", comparison.only_in_trace2)):
        if ops:
            names = ", ".join(f"{code(o.name)} ({o.time_ms:.3f} ms)" for o in ops[:UNMATCHED_LISTED])
            more = f" and {len(ops) - UNMATCHED_LISTED} more" if len(ops) > UNMATCHED_LISTED else ""
            parts.append(f"Only in {label}: {names}{more}.")
    return " ".join(parts)


def top_category(categories: list[CategoryTime]) -> str:
    if not categories:
        return "n/a"
    top = categories[0]
    return f"{top.op_category} ({top.percentage:.1f}% of op kernel time)"


def report_fields(comparison: OpComparison, e2e_ms: float, trace2_name: str, gpu2: dict[str, Any],
                  categories1: list[CategoryTime], categories2: list[CategoryTime],
                  platform_spec2: dict[str, Any]) -> dict[str, Any]:
    """The ReportInputs fields a comparative report adds to (or changes in) the standalone ones;
    `reproduce_sql` holds queries to append to the standalone ones."""
    trace_ids = f"({sql_literal(comparison.trace1_id)}, {sql_literal(comparison.trace2_id)})"
    sql = f"-- every op of both traces, matched\nselect * from op_perf where trace_id in {trace_ids}"
    return {
        "comparison_scope": "comparative",
        "platform2": comparison.platform2,
        "trace2_name": trace2_name,
        "trace2_id": comparison.trace2_id,
        "gpu_utilization2": gpu2,
        "platform_spec2": platform_spec2,
        # both sides by the same measure: the op category with the most kernel time
        "top_bottleneck_category": top_category(categories1),
        "top_bottleneck_category2": top_category(categories2),
        "top_operations": top_operations(comparison, e2e_ms),
        "op_matching_note": matching_note(comparison),
        "reproduce_sql": [  # added to the standalone queries
            ("GPU time breakdown of both traces", f"select * from gpu_timeline where trace_id in {trace_ids}"),
            ("Op signatures of both traces", sql),
        ],
    }
