"""The analysis steps before the agents: load the trace(s), read their facts from the marts, write
the perf report and the per-category data, identify the model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.agents.registry import COMPUTE_AGENTS, SYSTEM_AGENTS
from tracelake.analysis_facts import (
    AnalysisFacts,
    TraceFacts,
    gpu_utilization,
    platform_specs,
    quality_gate,
    run_mode,
    trace_platform,
    workload_facts,
)
from tracelake.analysis_runner import AnalysisRunner
from tracelake.analyze_options import AnalyzeOptions
from tracelake.analyzers import trace_overview
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.comparison import CategoryTime, OpComparison, category_times, compare_ops
from tracelake.analyzers.model_id import ModelInfo, identify_model
from tracelake.core.errors import BadTraceError
from tracelake.graph_captures import CaptureFile
from tracelake.ingestion import IngestProgress, ingest_paths
from tracelake.reports.comparative_report import op_comparison_table
from tracelake.reports.csv_files import write_csv
from tracelake.reports.perf_report import perf_report_tables, write_perf_report
from tracelake.run_contracts import CategoryEntry, CategoryManifest, CategoryMetadata
from tracelake.warehouse import Warehouse


@dataclass(frozen=True)
class TraceIds:
    trace_id: str
    trace2_id: str | None  # comparative scope

    @property
    def analyzed(self) -> list[str]:
        return [self.trace_id] + ([self.trace2_id] if self.trace2_id is not None else [])


@dataclass(frozen=True)
class CategoryData:
    entries: list[CategoryEntry]
    category_time: dict[str, float]  # kernel time (ms) of each compute agent's op categories
    categories2: list[CategoryTime]  # comparative scope: trace 2's time per category
    op_comparison: OpComparison | None  # comparative scope: each op of trace 1 against trace 2


def ingest_traces(trace: Path, options: AnalyzeOptions, warehouse: Warehouse, progress: IngestProgress | None,
                  captures: dict[Path, list[CaptureFile]]) -> TraceIds:
    paths = [trace] + ([options.compare] if options.compare is not None else [])
    report = ingest_paths(paths, warehouse, {}, options.jobs, progress, captures)
    if report.failed:
        raise BadTraceError(report.failed[0].message)
    ids = {outcome.path: outcome.trace_id for outcome in report.outcomes}
    trace_id = ids[trace]
    assert trace_id is not None
    return TraceIds(trace_id, ids[options.compare] if options.compare is not None else None)


def open_marts(warehouse: Warehouse, traces: TraceIds, runner: AnalysisRunner) -> duckdb.DuckDBPyConnection:
    """The read-only connection the steps share; the traces must still be there."""
    db = runner.keep_open(warehouse.connect_analysis(traces.analyzed))
    for analyzed in traces.analyzed:  # a `tracelake rm` may have taken it out since the ingest
        if not db.execute("select 1 from traces where trace_id = ?", [analyzed]).fetchone():
            raise BadTraceError(f"trace {analyzed} was removed from {warehouse.root} (tracelake rm) while this "
                                "analyze ran; run it again to ingest it anew")
    return db


def read_facts(db: duckdb.DuckDBPyConnection, trace: Path, traces: TraceIds, options: AnalyzeOptions,
               chosen_platforms: tuple[str | None, str | None], runner: AnalysisRunner) -> AnalysisFacts:
    """The facts of the trace(s), once; metadata/run.json and trace_quality.json say them."""
    comparative = traces.trace2_id is not None
    platform = trace_platform(db, traces.trace_id, chosen_platforms[0],
                              "trace 1" if comparative else "the trace", "--platform")
    runner.warnings += [platform.warning] if platform.warning else []
    platform2 = None
    if traces.trace2_id is not None:
        platform2 = trace_platform(db, traces.trace2_id, chosen_platforms[1], "trace 2", "--platform2")
        runner.warnings += [platform2.warning] if platform2.warning else []
    mode, mode_reason = run_mode(db, traces.trace_id, options.mode)
    runner.metadata = runner.metadata.model_copy(update={
        "trace_id": traces.trace_id, "platform": platform.name, "platform_source": platform.source, "mode": mode,
        "mode_reason": mode_reason, "trace2_id": traces.trace2_id,
        "platform2": platform2.name if platform2 else None, "platform2_source": platform2.source if platform2 else None})
    runner.write("metadata/run.json", runner.metadata)
    gate = quality_gate(db, traces.trace_id, options.capture_folder is not None)
    runner.write("metadata/trace_quality.json", gate)
    second = None
    if traces.trace2_id is not None and platform2 is not None:
        gate2 = quality_gate(db, traces.trace2_id, options.capture_folder2 is not None)
        runner.write("metadata/trace2_quality.json", gate2)
        if not (gate.gpu_events_present and gate2.gpu_events_present):
            which = options.compare if gate.gpu_events_present else trace
            raise BadTraceError(f"{which}: the trace has no GPU events; a comparative analysis needs GPU "
                                "work in both traces (analyze it alone instead)")
        second = TraceFacts(traces.trace2_id, platform2, gate2, gpu_utilization(db, traces.trace2_id))
    workload, phases = workload_facts(db, traces.trace_id)
    return AnalysisFacts(
        trace=TraceFacts(traces.trace_id, platform, gate, gpu_utilization(db, traces.trace_id)), trace2=second,
        mode=mode, mode_reason=mode_reason, workload=workload, phases=phases, platform_specs=platform_specs())


def write_perf_reports(db: duckdb.DuckDBPyConnection, facts: AnalysisFacts, options: AnalyzeOptions,
                       runner: AnalysisRunner) -> None:
    """TraceLens' perf report (CSVs, and the workbook with --xlsx) of each trace."""
    reports = [(facts.trace, "perf_report_trace1" if facts.comparative else "perf_report")]
    reports += [(facts.trace2, "perf_report_trace2")] if facts.trace2 is not None else []
    for analyzed, stem in reports:
        tables = perf_report_tables(db, analyzed.trace_id, analyzed.platform.name, options.inference_layout)
        write_perf_report(tables, runner.staging / f"{stem}_csvs",
                          runner.staging / f"{stem}.xlsx" if options.xlsx else None)


def identify_trace_model(db: duckdb.DuckDBPyConnection, facts: AnalysisFacts, runner: AnalysisRunner) -> ModelInfo:
    with db.cursor() as model_db:  # it runs beside other steps: a connection of its own to the same database
        model_info = identify_model(model_db, facts.trace.trace_id)
    runner.write("metadata/model_info.json", model_info)
    return model_info


def _agent_categories(db: duckdb.DuckDBPyConnection, op_perf: pa.Table) -> dict[str, list[str]]:
    """Op categories present in the trace (largest first), assigned to the compute agent that owns
    them (agent_categories seed); the generic agent takes the rest."""
    present = pc.unique(op_perf.column("op_category")).to_pylist()
    owners = load_agent_categories(db)
    owned = {d.name: [c for c in present if c in owners.owned_by(d.name)] for d in COMPUTE_AGENTS}
    owned["generic"] = [c for c in present if c not in owners.owned]
    return owned


def _compute_category_data(db: duckdb.DuckDBPyConnection, facts: AnalysisFacts,
                           runner: AnalysisRunner) -> tuple[list[CategoryEntry], dict[str, float]]:
    """category_data/<agent>_ops.csv and its metadata for each compute agent that owns ops here."""
    entries: list[CategoryEntry] = []
    category_time: dict[str, float] = {}
    trace_id, platform = facts.trace.trace_id, facts.trace.platform.name
    op_perf = trace_overview.op_perf_table(db, trace_id, platform)
    owned = _agent_categories(db, op_perf)
    for definition in COMPUTE_AGENTS:
        categories = owned.get(definition.name) or []
        if not categories:
            continue
        table = op_perf.filter(pc.is_in(op_perf.column("op_category"), pa.array(categories, pa.string())))
        path = runner.staging / "category_data" / f"{definition.name}_ops.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_csv(table, path)
        time_ms = float(sum(table.column("kernel_time_sum_us").to_pylist()) / 1000.0)
        category_time[definition.name] = time_ms
        runner.write(f"metadata/{definition.name}_metadata.json", CategoryMetadata(
            category=definition.name, display_name=definition.display_name, agent=definition.name,
            tier="compute", op_categories=categories, platform=platform, platform_spec=facts.platform_spec,
            gpu_utilization=facts.trace.gpu, trace_id=trace_id))
        entries.append(CategoryEntry(
            name=definition.name, display_name=definition.display_name, tier="compute_kernel",
            agent=definition.name, ops_count=int(sum(table.column("operation_count").to_pylist())),
            gpu_kernel_time_ms=round(time_ms, 6),
            files=[f"category_data/{definition.name}_ops.csv", f"metadata/{definition.name}_metadata.json"]))
    return entries, category_time


def _system_category_data(facts: AnalysisFacts, runner: AnalysisRunner) -> list[CategoryEntry]:
    entries = []
    for definition in SYSTEM_AGENTS:
        runner.write(f"metadata/{definition.name}_metadata.json", CategoryMetadata(
            category=definition.name, display_name=definition.display_name, agent=definition.name,
            tier="system", op_categories=[], platform=facts.trace.platform.name, platform_spec=facts.platform_spec,
            gpu_utilization=facts.trace.gpu, trace_id=facts.trace.trace_id))
        entries.append(CategoryEntry(
            name=definition.name, display_name=definition.display_name, tier="system", agent=definition.name,
            ops_count=0, gpu_kernel_time_ms=0.0, files=[f"metadata/{definition.name}_metadata.json"]))
    return entries


def write_category_data(db: duckdb.DuckDBPyConnection, trace: Path, facts: AnalysisFacts,
                        runner: AnalysisRunner) -> CategoryData:
    """What each agent's category holds (category_data/, the manifest) and, comparing, each op of
    trace 1 against trace 2."""
    entries: list[CategoryEntry] = []
    category_time: dict[str, float] = {}
    if facts.trace.gate.run_compute_tier:
        entries, category_time = _compute_category_data(db, facts, runner)
    if facts.trace.gate.run_system_tier:
        entries += _system_category_data(facts, runner)
    second = facts.trace2
    categories2 = category_times(db, second.trace_id, second.platform.name) if second is not None else []
    runner.write("category_data/category_manifest.json", CategoryManifest(
        platform=facts.trace.platform.name, trace_path=str(trace.resolve()),
        comparison_scope="comparative" if facts.comparative else "standalone",
        gpu_utilization=facts.trace.gpu, categories=entries, trace2_gpu_utilization=second.gpu if second else None,
        trace2_ops_summary_by_category=[c.seed_keys() for c in categories2] if second is not None else None))
    op_comparison = None
    if second is not None:
        op_comparison = compare_ops(db, facts.trace.trace_id, facts.trace.platform.name,
                                    second.trace_id, second.platform.name)
        runner.write("category_data/op_comparison.json", op_comparison)
        write_csv(op_comparison_table(op_comparison), runner.staging / "perf_report_trace1_csvs" / "op_comparison.csv")
    return CategoryData(entries, category_time, categories2, op_comparison)
