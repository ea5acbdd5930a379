"""What `analyze` records in the warehouse after a report is in place: the ranked findings, the
claims ledger (the GPU events and idle gaps each finding owns) and where the report is. The
tables are dbt sources (models/staging/_sources.yml, source `analysis`), documented column by
column there; this module is the one place that creates and writes them."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from tracelake.analyzers.contracts import AgentResult, AnalysisContext, PriorityData
from tracelake.warehouse import Warehouse

_TABLES = {
    "findings": """
        trace_id varchar, trace2_id varchar, global_rank integer, tier varchar, category varchar,
        agent varchar, finding_id varchar, title varchar, impact_low_percent double,
        impact_mid_percent double, impact_high_percent double, recoverable_ms double,
        claimed_ms double, claimed_gpu_events integer, claimed_idle_gaps integer,
        estimate_method varchar, confidence varchar, evidence_sql varchar, analysis_sql varchar,
        recorded_at timestamptz, ts_start_us double, ts_end_us double, steps bigint[]""",
    "finding_kernels": "trace_id varchar, trace2_id varchar, finding_id varchar, event_idx bigint, claimed_us double",
    "finding_gaps": "trace_id varchar, trace2_id varchar, finding_id varchar, gap_id bigint, claimed_us double",
    "analyses": """
        trace_id varchar, trace2_id varchar, comparison_scope varchar, platform varchar,
        out_dir varchar, analysis_md varchar, finding_count integer, analyzed_at timestamptz""",
}
ANALYSIS_TABLES = tuple(_TABLES)  # what `tracelake rm` cleans of a removed trace
FINDINGS_COLUMNS = ", ".join(column.split()[0] for column in _TABLES["findings"].split(","))  # inserted by name

# columns added since a table was first created in a user's warehouse (created by an older version)
_ADDED_COLUMNS = {"findings": ("claimed_ms double", "claimed_gpu_events integer", "claimed_idle_gaps integer",
                               "analysis_sql varchar", "ts_start_us double", "ts_end_us double", "steps bigint[]")}


def _claims(results: list[AgentResult], ctx: AnalysisContext, ranked: set[str]) -> tuple[pa.Table, pa.Table]:
    owned = [f for r in results for f in r.findings if f.finding_id in ranked]
    kernels = [(f.finding_id, idx, us) for f in owned for idx, us in f.claimed_kernels.items()]
    gaps = [(f.finding_id, gap, us) for f in owned for gap, us in f.claimed_gaps.items()]

    def table(rows: list[tuple[str, int, float]], id_column: str) -> pa.Table:
        return pa.table({
            "trace_id": pa.array([ctx.trace_id] * len(rows), pa.string()),
            "trace2_id": pa.array([ctx.trace2_id] * len(rows), pa.string()),
            "finding_id": pa.array([r[0] for r in rows], pa.string()),
            id_column: pa.array([r[1] for r in rows], pa.int64()),
            "claimed_us": pa.array([r[2] for r in rows], pa.float64()),
        })
    return table(kernels, "event_idx"), table(gaps, "gap_id")


def record_analysis(warehouse: Warehouse, ctx: AnalysisContext, priority: PriorityData,
                    results: list[AgentResult], out_dir: Path) -> None:
    """Replace the trace's (or trace pair's) findings and claims, and point `analyses` at the
    report in `out_dir` (an output folder holds one report: an older analysis there is gone)."""
    now = datetime.now(timezone.utc)
    rows = [(ctx.trace_id, ctx.trace2_id, f.global_rank, f.tier, f.category, f.agent, f.finding_id, f.title,
             f.impact_low, f.impact_score, f.impact_high, f.recoverable_ms, f.claimed_time_ms,
             f.claimed_kernel_count, f.claimed_gap_count, f.estimate_method, f.confidence, f.evidence_sql,
             f.analysis_sql, now, f.ts_start_us, f.ts_end_us, f.steps) for f in priority.findings]
    kernel_claims, gap_claims = _claims(results, ctx, {f.finding_id for f in priority.findings})
    scope = [ctx.trace_id, ctx.trace2_id]
    with warehouse.write_lock(), warehouse.writing() as con:
        for name, columns in _TABLES.items():
            con.execute(f"create table if not exists {name} ({columns})")
        for name, added in _ADDED_COLUMNS.items():
            for column in added:
                con.execute(f"alter table {name} add column if not exists {column}")
        for name in ("findings", "finding_kernels", "finding_gaps"):
            con.execute(f"delete from {name} where trace_id = ? and trace2_id is not distinct from ?", scope)
        con.execute("delete from analyses where (trace_id = ? and trace2_id is not distinct from ?) or analysis_md = ?",
                    [*scope, str(out_dir / "analysis.md")])
        if rows:  # by name: a findings table an older version created has its columns in another order
            con.executemany(f"insert into findings ({FINDINGS_COLUMNS}) values ({', '.join('?' * len(rows[0]))})", rows)
        con.register("kernel_claims", kernel_claims)
        con.register("gap_claims", gap_claims)
        con.execute("insert into finding_kernels select * from kernel_claims")
        con.execute("insert into finding_gaps select * from gap_claims")
        con.execute("insert into analyses values (?, ?, ?, ?, ?, ?, ?, ?)", [
            ctx.trace_id, ctx.trace2_id, ctx.comparison_scope, ctx.platform, str(out_dir),
            str(out_dir / "analysis.md"), len(rows), now])
