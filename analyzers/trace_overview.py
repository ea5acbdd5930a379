"""The trace-level facts `analyze` reads around the agents: the GPU timeline row, the quality
checks, the run's mode and platform, the op table and the top operations. Queries over the
marts only, so the pipeline keeps to orchestration."""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from tracelake.analyzers import settings
from tracelake.analyzers.common import query_rows
from tracelake.analyzers.contracts import AgentResult, ServingStep, TracePhases, WorkloadFacts
from tracelake.core.sql_text import sql_literal

TOP_OPERATIONS = 10  # rows of the report's Top Operations table (TraceLens lists the top 10)


def gpu_timeline(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, Any] | None:
    rows = query_rows(db, "select * from gpu_timeline where trace_id = ?", [trace_id])
    return rows[0] if rows else None


def quality_checks(db: duckdb.DuckDBPyConnection, trace_id: str) -> list[dict[str, Any]]:
    return query_rows(db, "select check_name, value, threshold, verdict, detail from trace_quality "
                          "where trace_id = ? order by check_name", [trace_id])


def run_mode(db: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[str | None, str]:
    """runs.mode and the evidence for it."""
    row = db.execute("select mode, mode_reason from runs where trace_id = ?", [trace_id]).fetchone()
    assert row is not None, f"no runs row for trace {trace_id}"  # the ingest writes one per trace
    mode, reason = row
    return mode, reason


def workload_facts(db: duckdb.DuckDBPyConnection, trace_id: str) -> WorkloadFacts:
    """The trace's workload_facts row."""
    rows = query_rows(db, "select * exclude (trace_id) from workload_facts where trace_id = ?", [trace_id])
    return WorkloadFacts(**rows[0]) if rows else WorkloadFacts()


def trace_phases(db: duckdb.DuckDBPyConnection, trace_id: str) -> TracePhases:
    """The trace's phases rows (its serving steps), in step order."""
    columns = ", ".join(ServingStep.model_fields)
    rows = query_rows(db, f"select {columns} from phases where trace_id = ? order by step_index", [trace_id])
    return TracePhases(steps=[ServingStep(**row) for row in rows])


def finding_phase(db: duckdb.DuckDBPyConnection, trace_id: str, event_idxs: list[int],
                  phases: TracePhases) -> str | None:
    """The phase(s) of the steps that launched these GPU events ("prefill", "decode + prefill"),
    else every phase of the trace (a finding over idle gaps or trace-wide); None without phases."""
    if not phases.phase_names:
        return None
    if event_idxs:
        found = [row[0] for row in db.execute(
            "select distinct phase from phase_kernels where trace_id = ? and phase is not null "
            "and event_idx in (select unnest(?::bigint[])) order by phase", [trace_id, event_idxs]).fetchall()]
        if found:
            return " + ".join(found)
    return " + ".join(phases.phase_names)


def with_finding_phases(db: duckdb.DuckDBPyConnection, trace_id: str, phases: TracePhases,
                        results: list[AgentResult]) -> list[AgentResult]:
    """Every finding with the phase it applies to (finding_phase of its claimed GPU events)."""
    return [r.model_copy(update={"findings": [
        f.model_copy(update={"phase": finding_phase(db, trace_id, sorted(f.claimed_kernels), phases)})
        for f in r.findings]}) for r in results]


def trace_device(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, Any]:
    """The roofline platform of the device name, whose word it is (trace device / assumed), the
    runtime an assumed one is the default of, the device name, the platform tag and the GPU event count."""
    return query_rows(db, "select platform, platform_source, platform_assumed_for, device_name, "
                          "tags['platform'] as platform_tag, gpu_event_count from traces where trace_id = ?",
                      [trace_id])[0]


def op_perf_table(db: duckdb.DuckDBPyConnection, trace_id: str, platform: str) -> pa.Table:
    """The trace's op_perf rows on `platform`, largest kernel time first (the category data CSVs)."""
    return db.sql(
        "select * exclude (module_chain), array_to_string(module_chain, ' > ') as module_chain from op_perf "
        "where trace_id = ? and platform = ? order by kernel_time_sum_us desc",
        params=[trace_id, platform]).to_arrow_table()


def roofline_anomalies(db: duckdb.DuckDBPyConnection, trace_id: str, platform: str) -> list[tuple[str, float]]:
    """Op signatures whose mean efficiency is above the roofline: (name, % of roofline)."""
    return [tuple(row) for row in db.execute(
        "select name, pct_roofline_mean from op_perf where trace_id = ? and platform = ? "
        "and pct_roofline_mean > ? order by pct_roofline_mean desc",
        [trace_id, platform, settings.ROOFLINE_VALIDATION_MAX_PERCENT]).fetchall()]


def top_operations(db: duckdb.DuckDBPyConnection, trace_id: str, platform: str, e2e_ms: float) -> list[dict[str, Any]]:
    return query_rows(db, """
        select name, op_category as category, operation_count as count, kernel_time_sum_us / 1000.0 as time_ms,
               100.0 * kernel_time_sum_us / 1000.0 / nullif(?, 0) as percent_of_e2e,
               pct_roofline_mean as pct_roofline, roofline_bound as bound
        from op_perf where trace_id = ? and platform = ? order by kernel_time_sum_us desc, name, signature_key limit ?
    """, [e2e_ms, trace_id, platform, TOP_OPERATIONS])


def kernel_categories(db: duckdb.DuckDBPyConnection, trace_id: str) -> list[dict[str, Any]]:
    """GPU time by kernel taxonomy category (from kernel names), largest first, over every kernel
    (linked to a launch or not): what a trace without CPU ops still tells about its kernels."""
    return query_rows(db, """
        select kernel_category as category, count(*) as kernel_count, sum(dur_us) / 1000.0 as time_ms,
               100.0 * sum(dur_us) / sum(sum(dur_us)) over () as percent_of_kernel_time,
               arg_max(name, dur_us) as longest_kernel
        from kernels where trace_id = ?
        group by kernel_category order by time_ms desc, category
    """, [trace_id])


def top_cpu_operations(db: duckdb.DuckDBPyConnection, trace_id: str) -> list[dict[str, Any]]:
    """A trace without GPU events: its top-level cpu ops by host time."""
    return query_rows(db, """
        select name, 'cpu' as category, count(*) as count, sum(dur_us) / 1000.0 as time_ms,
               null::double as percent_of_e2e, null::double as pct_roofline, null as bound
        from cpu_ops where trace_id = ? and depth = 0 group by name order by time_ms desc limit ?
    """, [trace_id, TOP_OPERATIONS])


def reproduce_queries(trace_id: str, platform: str) -> list[tuple[str, str]]:
    """(label, query) for the report's trace-level numbers, as a user would run them."""
    trace, on = sql_literal(trace_id), sql_literal(platform)
    return [
        ("GPU time breakdown", f"select * from gpu_timeline where trace_id = {trace}"),
        ("Top operations", f"select name, op_category, operation_count, kernel_time_sum_us, pct_roofline_mean "
                           f"from op_perf where trace_id = {trace} and platform = {on} "
                           f"order by kernel_time_sum_us desc limit {TOP_OPERATIONS}"),
        ("Trace quality", f"select check_name, value, verdict, detail from trace_quality where trace_id = {trace}"),
        ("Findings", "select global_rank, title, claimed_ms, recoverable_ms, impact_mid_percent from findings "
                     f"where trace_id = {trace} and trace2_id is null order by global_rank"),
    ]
