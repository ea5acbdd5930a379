"""The orchestrator behind `tracelake analyze` (SPEC §5, steps 0-11).

One trace load (the ingest); everything after it reads the warehouse. The output folder is
checked before any work (only a new, empty or TraceLake-written folder is replaced:
tracelake/folders.py), built in a staging folder beside it and swapped in at the end, so a re-run
replaces it cleanly and a failed or killed run leaves the previous report intact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from tracelake import __version__
from tracelake.agents.claims import assign_claims, with_ledger_sql
from tracelake.agents.llm import LlmCommand
from tracelake.agents.registry import COMPUTE_AGENTS, FUSION_AGENT, SYSTEM_AGENTS, by_name
from tracelake.agents.runner import RunnerSettings, render, run_tier
from tracelake.agents.trace_scope import limit_findings, opening_sentences
from tracelake.analysis_record import ReportRecord
from tracelake.analyzers import settings, trace_overview
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.comparison import category_times, compare_ops
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, WorkloadFacts
from tracelake.analyzers.coverage import near_roofline_lines, unaddressed_ops
from tracelake.analyzers.finding_windows import with_finding_windows
from tracelake.analyzers.model_id import ModelInfo, identify_model
from tracelake.core.errors import BadTraceError
from tracelake.crashpoints import crash_point
from tracelake.folders import FolderKind, OutputStaging, OutputTarget, claim_output_folder
from tracelake.graph_captures import CaptureFile, read_capture_folder
from tracelake.ingestion import IngestProgress, ingest_paths, trace_files_in
from tracelake.memory import release_free_memory
from tracelake.platforms import load_platforms, resolve_platform
from tracelake.reports.comparative_report import op_comparison_table, report_fields
from tracelake.reports.csv_files import write_csv
from tracelake.reports.perf_report import perf_report_tables, write_perf_report
from tracelake.reports.plot_process import PlotProcess
from tracelake.reports.priority import build_priority_data
from tracelake.reports.report_inputs import PLOT_PENDING, ReportInputs
from tracelake.reports.trace_export import ts_base_us
from tracelake.reports.validation import validate
from tracelake.run_contracts import (
    AgentTiming,
    CategoryEntry,
    CategoryManifest,
    CategoryMetadata,
    GpuUtilization,
    QualityCheck,
    QualityGate,
    RunMetadata,
    StepTiming,
)
from tracelake.staging import fit_name
from tracelake.warehouse import Warehouse

# --mode values that write TraceLens' inference perf-report layout (parent_module op summaries,
# `<family>_fwd` sheets); given on the command line, never auto-detected.
INFERENCE_REPORT_MODES = ("inference", "inference-graph")


@dataclass(frozen=True)
class AnalyzeOptions:
    platform: str | None = None
    mode: str = "auto"
    out_dir: Path | None = None
    jobs: int = 1
    xlsx: bool = False
    capture_folder: Path | None = None
    agents: str = "deterministic"
    llm_cmd: str | None = None
    compare: Path | None = None  # comparative scope: trace 2 (the target; `trace` is the baseline)
    platform2: str | None = None
    capture_folder2: Path | None = None
    force: bool = False  # replace a TraceLake report folder that also holds the user's files (kept)


@dataclass
class AnalysisOutcome:
    trace_id: str
    platform: str
    platform_source: str
    trace2_id: str | None
    platform2: str | None
    out_dir: Path
    analysis_md: Path
    warnings: list[str]
    report_problems: list[str]


# What the progress display calls each step of the run (run.json keeps the step names).
STAGE_LABELS = {
    "1 ingest": "reading the trace",
    "2 quality gate": "checking the trace",
    "1 perf report": "writing the perf report",
    "3-6 category data": "summarizing op categories",
    "7 system agents": "analyzing idle time, transfers and fusion",
    "8 compute agents": "analyzing kernels by category",
    "8.5 priorities": "ranking the findings",
    "9 validation": "checking the findings add up",
    "11 report": "writing analysis.md",
}


@dataclass
class _Run:
    metadata: RunMetadata
    staging: Path
    warnings: list[str] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, on_stage: Callable[[str], None]) -> Iterator[None]:
        on_stage(STAGE_LABELS.get(name, name))
        started = datetime.now(UTC)
        clock = time.perf_counter()
        try:
            yield
        finally:
            self.metadata.steps.append(StepTiming(
                step=name, started_at=started, finished_at=datetime.now(UTC),
                seconds=round(time.perf_counter() - clock, 4),
            ))

    def write(self, relative: str, model: BaseModel | str | bytes) -> None:
        path = self.staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(model, BaseModel):
            path.write_text(model.model_dump_json(indent=2))
        elif isinstance(model, bytes):
            path.write_bytes(model)
        else:
            path.write_text(model)


class _JsonList(BaseModel):
    """A list or mapping payload written as JSON through pydantic."""

    items: Any


ANALYSIS_FOLDER = FolderKind(
    name="analysis", sign="metadata/run.json",
    entries=frozenset({
        "analysis.md", "priority_data.json", "perf_improvement.png", "perf_report_csvs", "perf_report.xlsx",
        "perf_report_trace1_csvs", "perf_report_trace2_csvs", "perf_report_trace1.xlsx", "perf_report_trace2.xlsx",
        "category_data", "system_findings", "category_findings", "metadata",
    }),
)
OUT_DIR_SUFFIX = "_analysis"


def _trace_stem(trace: Path) -> str:
    name = trace.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def default_out_dir(trace: Path, compare: Path | None = None) -> Path:
    """`<trace dir>/<trace name>_analysis` (`<name>_vs_<name2>_analysis` with --compare): one
    folder per trace, so traces of one folder never share a report folder."""
    stem = _trace_stem(trace) + (f"_vs_{_trace_stem(compare)}" if compare is not None else "")
    return trace.resolve().parent / fit_name(stem, OUT_DIR_SUFFIX)


def _claim_out_dir(trace: Path, warehouse: Warehouse, options: AnalyzeOptions) -> OutputTarget:
    inputs = [trace, options.compare, options.capture_folder, options.capture_folder2]
    return claim_output_folder(
        options.out_dir or default_out_dir(trace, options.compare), ANALYSIS_FOLDER,
        protected=[p for p in inputs if p is not None] + [warehouse.root],
        reserved=[warehouse.parquet_dir, warehouse.staging_dir, warehouse.dbt_dir],
        force=options.force)


def _gpu_utilization(db: duckdb.DuckDBPyConnection, trace_id: str) -> GpuUtilization:
    row = trace_overview.gpu_timeline(db, trace_id)
    if row is None:
        return GpuUtilization()
    return GpuUtilization(**{k: v for k, v in row.items() if k in GpuUtilization.model_fields and v is not None})


def _capture_links(trace: Path, options: AnalyzeOptions) -> dict[Path, list[CaptureFile]]:
    links = {}
    for replay, folder in ((trace, options.capture_folder), (options.compare, options.capture_folder2)):
        if replay is not None and folder is not None:
            links[replay] = read_capture_folder(folder)
    return links


def _quality_gate(db: duckdb.DuckDBPyConnection, trace_id: str, capture_folder: Path | None) -> QualityGate:
    checks = [QualityCheck(**row) for row in trace_overview.quality_checks(db, trace_id)]
    verdict = {c.check_name: c for c in checks}
    gpu_present = verdict.get("gpu_events_present") is not None and verdict["gpu_events_present"].verdict == "pass"
    cpu_present = verdict.get("cpu_ops_present") is not None and verdict["cpu_ops_present"].verdict == "pass"
    replay = verdict.get("graph_replay")
    # warn: replayed kernels the merge did not map (no capture traces, or none that match)
    graph_without_capture = replay is not None and replay.verdict == "warn"
    skipped = []
    unread = verdict.get("unrecognized_device_events")
    if not gpu_present and unread is not None and unread.value:
        skipped.append("GPU analyses (timeline, kernels, roofline, system and compute agents): none of the trace's "
                       f"GPU events is in a category TraceLake reads ({unread.detail.split(';')[0]}), so this report "
                       "covers its CPU ops only")
    elif not gpu_present:
        skipped.append("GPU analyses (timeline, kernels, roofline, system and compute agents): the trace has no GPU "
                       "events, so this report covers CPU ops only")
    elif not cpu_present:
        skipped.append("op-level compute analysis (roofline, per-op findings): the trace has no CPU ops, so only "
                       "kernel-level analysis is possible: kernels cannot be attributed to PyTorch ops or their shapes, "
                       "and categories come from kernel names")
    if graph_without_capture and capture_folder is None:
        skipped.append("per-op attribution inside GPU graph replays: no capture traces were given (--capture-folder), "
                       "so replayed kernels are attributed to the graph launch")
    elif graph_without_capture and replay is not None:
        skipped.append(f"per-op attribution of the GPU graph replays the capture traces do not match: {replay.detail}")
    return QualityGate(
        checks=checks, gpu_events_present=gpu_present, cpu_ops_present=cpu_present,
        graph_replay_without_capture=graph_without_capture, run_system_tier=gpu_present,
        run_compute_tier=gpu_present and cpu_present, skipped_steps=skipped,
        workload_limits=opening_sentences(c.model_dump() for c in checks),
    )


def _analysis_window_ms(gpu: GpuUtilization, facts: WorkloadFacts) -> float:
    """The E2E the impacts are % of: the measured timeline, less the idle at the profile window's
    edges (workload_facts.analysis_window_ms), which is outside every step and no change recovers."""
    if facts.window_edge_gap_count and facts.analysis_window_ms and facts.analysis_window_ms > 0:
        return facts.analysis_window_ms
    return gpu.total_time_ms


def _detect_mode(db: duckdb.DuckDBPyConnection, trace_id: str, requested: str) -> tuple[str | None, str]:
    """--mode when given, else runs.mode and its evidence (one detection, in the mart)."""
    if requested != "auto":
        return requested, f"--mode {requested}"
    return trace_overview.run_mode(db, trace_id)


def _agent_categories(db: duckdb.DuckDBPyConnection, op_perf: pa.Table) -> dict[str, list[str]]:
    """Op categories present in the trace (largest first), assigned to the compute agent that owns
    them (agent_categories seed); the generic agent takes the rest."""
    present = pc.unique(op_perf.column("op_category")).to_pylist()
    owners = load_agent_categories(db)
    owned = {d.name: [c for c in present if c in owners.owned_by(d.name)] for d in COMPUTE_AGENTS}
    owned["generic"] = [c for c in present if c not in owners.owned]
    return owned


def _write_category_data(run: _Run, db: duckdb.DuckDBPyConnection, ctx: AnalysisContext,
                         gpu: GpuUtilization, platform_spec: dict[str, Any],
                         gate: QualityGate) -> tuple[list[CategoryEntry], dict[str, float]]:
    entries: list[CategoryEntry] = []
    category_time: dict[str, float] = {}
    if gate.run_compute_tier:
        op_perf = trace_overview.op_perf_table(db, ctx.trace_id, ctx.platform)
        owned = _agent_categories(db, op_perf)
        for definition in COMPUTE_AGENTS:
            categories = owned.get(definition.name) or []
            if not categories:
                continue
            table = op_perf.filter(pc.is_in(op_perf.column("op_category"), pa.array(categories, pa.string())))
            path = run.staging / "category_data" / f"{definition.name}_ops.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_csv(table, path)
            time_ms = float(sum(table.column("kernel_time_sum_us").to_pylist()) / 1000.0)
            category_time[definition.name] = time_ms
            run.write(f"metadata/{definition.name}_metadata.json", CategoryMetadata(
                category=definition.name, display_name=definition.display_name, agent=definition.name,
                tier="compute", op_categories=categories, platform=ctx.platform, platform_spec=platform_spec,
                gpu_utilization=gpu, trace_id=ctx.trace_id))
            entries.append(CategoryEntry(
                name=definition.name, display_name=definition.display_name, tier="compute_kernel",
                agent=definition.name, ops_count=int(sum(table.column("operation_count").to_pylist())),
                gpu_kernel_time_ms=round(time_ms, 6),
                files=[f"category_data/{definition.name}_ops.csv", f"metadata/{definition.name}_metadata.json"]))
    if gate.run_system_tier:
        for definition in SYSTEM_AGENTS:
            run.write(f"metadata/{definition.name}_metadata.json", CategoryMetadata(
                category=definition.name, display_name=definition.display_name, agent=definition.name,
                tier="system", op_categories=[], platform=ctx.platform, platform_spec=platform_spec,
                gpu_utilization=gpu, trace_id=ctx.trace_id))
            entries.append(CategoryEntry(
                name=definition.name, display_name=definition.display_name, tier="system", agent=definition.name,
                ops_count=0, gpu_kernel_time_ms=0.0, files=[f"metadata/{definition.name}_metadata.json"]))
    return entries, category_time


def _write_agent_outputs(run: _Run, results: list[AgentResult]) -> None:
    for result in results:
        run.write(f"category_data/{result.agent}_metrics.json", result)
        folder = "system_findings" if result.tier == "system" else "category_findings"
        markdown = result.findings_markdown or (
            f"# {result.agent}\n\n**Status**: {result.status}\n\n{result.error or 'No findings.'}\n")
        run.write(f"{folder}/{result.agent}_findings.md", markdown)


def _folder_given(folder: Path) -> str:
    """What to do when `analyze` is given a folder: it reports on one trace (one rank, one run)."""
    found = trace_files_in(folder)
    if not found:
        return f"{folder} is a folder with no .json or .json.gz trace files; analyze takes one trace file"
    example = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (f"{folder} is a folder; analyze writes the report of one trace file, e.g. `tracelake analyze {example}`"
            f"{more}; to load them all, `tracelake ingest {folder}`, then `tracelake compare` or `tracelake sql`")


def run_analysis(
    trace: Path,
    warehouse: Warehouse,
    options: AnalyzeOptions,
    progress: IngestProgress | None = None,
    on_stage: Callable[[str], None] = lambda _: None,
) -> AnalysisOutcome:
    chosen_platform = resolve_platform(options.platform) if options.platform else None
    chosen_platform2 = resolve_platform(options.platform2) if options.platform2 else None
    if trace.is_dir():
        raise BadTraceError(_folder_given(trace))
    if not trace.is_file():
        raise BadTraceError(f"{trace}: no such trace file; check the path")
    if options.compare is not None and not options.compare.is_file():
        raise BadTraceError(f"{options.compare}: no such trace file (--compare); check the path")
    captures = _capture_links(trace, options)  # a bad capture folder is refused before any work
    target = _claim_out_dir(trace, warehouse, options)
    out_dir = target.path
    record = ReportRecord(warehouse, out_dir)  # first: a kill from here on leaves nothing unknown
    try:
        output = OutputStaging(target)
    except OSError as exc:
        record.close()
        raise BadTraceError(f"cannot write the report next to {out_dir} ({exc.strerror}); choose a writable "
                            "folder with --out") from None
    run = _Run(RunMetadata(
        tracelake_version=__version__, trace_path=str(trace.resolve()), out_dir=str(out_dir),
        warehouse=str(warehouse.root), started_at=datetime.now(UTC),
        agents_runner=options.agents, comparison_scope="comparative" if options.compare else "standalone",
        trace2_path=str(options.compare.resolve()) if options.compare else None), output.content)
    plot = PlotProcess()  # imports matplotlib in a child process while the trace is ingested
    try:
        outcome = _analyze(trace, warehouse, options, (chosen_platform, chosen_platform2), out_dir, run, plot,
                           progress, on_stage, record, captures)
        record.decide(output.content / "analysis.md")  # the rows land with this report, or not at all
        crash_point("report-staged")
        output.publish()
        crash_point("report-published")
        record.commit()
        return outcome
    finally:
        for part in (plot, output, record):  # the record last: it keeps its rows if the report is in place
            part.close()


def _trace_platform(db: duckdb.DuckDBPyConnection, trace_id: str, chosen: str | None,
                    label: str, option: str) -> tuple[str, str, str | None, str]:
    """(platform, how it was chosen: given | detected | unknown (a device no row matches) | default (no
    device name), a warning for the last two, the platform as the report title names it: a default
    roofline says the device is unknown,
    "MI300X roofline (device 'Foo GPU' unknown)")."""
    device = trace_overview.trace_device(db, trace_id)
    detected, is_detected, device_name, gpu_events = (
        device["platform"], device["platform_detected"], device["device_name"], device["gpu_event_count"])
    platform = chosen or detected
    # a device name no platform row matches is unknown, never passed off as the default platform
    source = "given" if chosen else ("detected" if is_detected else ("unknown" if device_name else "default"))
    # without GPU events no roofline is drawn, so the default platform is nothing to warn about
    device = f"the device name {device_name!r} matches no known platform" if device_name else "the trace names no device"
    warning = (f"{label}: {device}; the roofline uses {platform} (pass {option} to choose)"
               if source in ("default", "unknown") and gpu_events else None)
    unknown = f"device {device_name!r} unknown" if device_name else "no device name in the trace"
    title = f"{platform} roofline ({unknown})" if warning else platform
    return platform, source, warning, title


def _analyze(trace: Path, warehouse: Warehouse, options: AnalyzeOptions,
             chosen_platforms: tuple[str | None, str | None], out_dir: Path, run: _Run, plot: PlotProcess,
             progress: IngestProgress | None, on_stage: Callable[[str], None],
             record: ReportRecord, captures: dict[Path, list[CaptureFile]]) -> AnalysisOutcome:
    from tracelake.reports.analysis_html import render_analysis_html  # noqa: PLC0415
    from tracelake.reports.analysis_md import embed_plot, render_analysis, validate_analysis  # noqa: PLC0415

    comparative = options.compare is not None
    with run.step("1 ingest", on_stage):
        paths = [trace] + ([options.compare] if options.compare is not None else [])
        report = ingest_paths(paths, warehouse, {}, options.jobs, progress, captures)
        if report.failed:
            raise BadTraceError(report.failed[0].message)
        ids = {outcome.path: outcome.trace_id for outcome in report.outcomes}
        trace_id = ids[trace]
        trace2_id = ids[options.compare] if options.compare is not None else None
        assert trace_id is not None
    release_free_memory()  # what the ingest's decode and model update left behind
    db = warehouse.connect_read_only()
    try:
        for analyzed in (trace_id, trace2_id):  # a `tracelake rm` may have taken it out since the ingest
            if analyzed is not None and not db.execute("select 1 from traces where trace_id = ?", [analyzed]).fetchone():
                raise BadTraceError(f"trace {analyzed} was removed from {warehouse.root} (tracelake rm) while this "
                                    "analyze ran; run it again to ingest it anew")
        platform, source, warning, platform_title = _trace_platform(
            db, trace_id, chosen_platforms[0], "trace 1" if comparative else "the trace", "--platform")
        run.warnings += [warning] if warning else []
        platform2 = source2 = platform2_title = None
        if trace2_id is not None:
            platform2, source2, warning2, platform2_title = _trace_platform(
                db, trace2_id, chosen_platforms[1], "trace 2", "--platform2")
            run.warnings += [warning2] if warning2 else []
        mode, mode_reason = _detect_mode(db, trace_id, options.mode)
        run.metadata = run.metadata.model_copy(update={
            "trace_id": trace_id, "platform": platform, "platform_source": source, "mode": mode,
            "mode_reason": mode_reason, "trace2_id": trace2_id, "platform2": platform2, "platform2_source": source2})
        run.write("metadata/run.json", run.metadata)

        with run.step("2 quality gate", on_stage):
            gate = _quality_gate(db, trace_id, options.capture_folder)
            run.write("metadata/trace_quality.json", gate)
            if trace2_id is not None:
                gate2 = _quality_gate(db, trace2_id, options.capture_folder2)
                run.write("metadata/trace2_quality.json", gate2)
                if not (gate.gpu_events_present and gate2.gpu_events_present):
                    which = options.compare if gate.gpu_events_present else trace
                    raise BadTraceError(f"{which}: the trace has no GPU events; a comparative analysis needs GPU "
                                        "work in both traces (analyze it alone instead)")

        gpu = _gpu_utilization(db, trace_id)
        gpu2 = _gpu_utilization(db, trace2_id) if trace2_id is not None else None
        facts = trace_overview.workload_facts(db, trace_id)
        platform_specs = {spec.platform: spec.model_dump() for spec in load_platforms()}
        platform_spec = platform_specs[platform]
        ctx = AnalysisContext(
            trace_id=trace_id, platform=platform, mode=mode,
            comparison_scope="comparative" if comparative else "standalone", trace2_id=trace2_id, platform2=platform2,
            e2e_time_ms=_analysis_window_ms(gpu, facts), computation_time_ms=gpu.computation_time_ms,
            quality_verdicts={c.check_name: c.verdict for c in gate.checks},
            facts=facts, phases=trace_overview.trace_phases(db, trace_id))
        runner = RunnerSettings(
            timeout_seconds=settings.AGENT_TIMEOUT_SECONDS, attempts=settings.AGENT_ATTEMPTS,
            llm=LlmCommand(options.llm_cmd, settings.AGENT_TIMEOUT_SECONDS) if options.agents == "llm" and options.llm_cmd else None)
        connect = partial(warehouse.connect_read_only, repair=False)  # checked once, above

        def system_tier() -> list[AgentResult]:
            with run.step("7 system agents", lambda _: None):
                tier = run_tier([d for d in SYSTEM_AGENTS if gate.run_system_tier], connect, ctx, runner, run.warnings)
            release_free_memory()
            return tier

        def model_identification() -> ModelInfo:
            with run.step("10 model identification", lambda _: None), connect() as model_db:
                return identify_model(model_db, trace_id)

        # The system agents and the model identification read only the marts, so they run in the
        # background while this thread writes the perf report and the category data (mostly DuckDB,
        # GIL released).
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="beside-perf-report") as background:
            system_results = background.submit(system_tier)
            with run.step("1 perf report", on_stage):
                # TraceLens' inference layout only on request: an auto-detected inference trace
                # keeps the default report, the one TraceLens writes without its inference script
                inference_layout = options.mode in INFERENCE_REPORT_MODES
                tables = perf_report_tables(db, trace_id, platform, inference_layout)
                stem = "perf_report_trace1" if comparative else "perf_report"
                write_perf_report(tables, run.staging / f"{stem}_csvs",
                                  run.staging / f"{stem}.xlsx" if options.xlsx else None)
                if trace2_id is not None and platform2 is not None:
                    write_perf_report(perf_report_tables(db, trace2_id, platform2, inference_layout),
                                      run.staging / "perf_report_trace2_csvs",
                                      run.staging / "perf_report_trace2.xlsx" if options.xlsx else None)

            release_free_memory()
            # started after the perf report, not beside it: three streams of queries at once set the
            # analysis' peak RSS (55 MB trace, bench/analyze.py)
            model_result = background.submit(model_identification)
            with run.step("3-6 category data", on_stage):
                entries, category_time = _write_category_data(run, db, ctx, gpu, platform_spec, gate)
                categories2 = (category_times(db, trace2_id, platform2)
                               if trace2_id is not None and platform2 is not None else [])
                run.write("category_data/category_manifest.json", CategoryManifest(
                    platform=platform, trace_path=str(trace.resolve()), comparison_scope=ctx.comparison_scope,
                    gpu_utilization=gpu, categories=entries, trace2_gpu_utilization=gpu2,
                    trace2_ops_summary_by_category=[c.seed_keys() for c in categories2] if comparative else None))
                op_comparison = (compare_ops(db, trace_id, platform, trace2_id, platform2)
                                 if trace2_id is not None and platform2 is not None else None)
                if op_comparison is not None:
                    run.write("category_data/op_comparison.json", op_comparison)
                    write_csv(op_comparison_table(op_comparison),
                              run.staging / "perf_report_trace1_csvs" / "op_comparison.csv")

            on_stage(STAGE_LABELS["7 system agents"])
            results, model_info = system_results.result(), model_result.result()
            run.write("metadata/model_info.json", model_info)
        fusion = next((r for r in results if r.agent == FUSION_AGENT and r.status == "OK"), None)
        if fusion is not None:
            ctx = ctx.model_copy(update={"fusion_flagged_ops": fusion.metrics.get("high_confidence_ops", {})})
            run.write("category_data/fusion_candidates.json", _JsonList(items=fusion.metrics.get("candidates", [])))
        multi = next((r for r in results if r.agent == "multi_kernel" and r.status == "OK"), None)
        if multi is not None:
            run.write("category_data/multi_kernel_data.json", _JsonList(items=multi.metrics))
        with run.step("8 compute agents", on_stage):
            # every compute agent runs (NO_DATA when it has nothing): ops re-labelled from `other`
            # by their kernels reach the gemm / sdpa agents even without such an op category
            compute = list(COMPUTE_AGENTS) if gate.run_compute_tier else []
            compute_results = run_tier(compute, connect, ctx, runner, run.warnings)
            results += compute_results
            category_time = {
                r.agent: float(r.metrics.get("total_time_ms", 0.0)) for r in compute_results if r.status == "OK"
            } or category_time
            # each GPU event and idle gap counts in one finding; then the findings are rendered
            results = with_ledger_sql(assign_claims(results, ctx.e2e_time_ms), trace_id, trace2_id)
            # each finding says the serving phase it applies to (the steps that launched its GPU events)
            results = trace_overview.with_finding_phases(db, trace_id, ctx.phases, results)
            # each finding's window on the timeline, its steps and the host work inside its gaps
            results = with_finding_windows(db, trace_id, results)
            # a trace that is not the workload (harness, capture): low confidence, no wins claimed
            results = limit_findings(results, ctx.quality_verdicts)
            results = [r if r.status == "ERROR" else render(by_name(r.agent), r, ctx, runner, run.warnings)
                       for r in results]
        _write_agent_outputs(run, results)
        run.metadata.agents = [AgentTiming(agent=r.agent, tier=r.tier, status=r.status, attempts=r.attempts,
                                           started_at=r.started_at, finished_at=r.finished_at) for r in results]

        release_free_memory()
        with run.step("8.5 priorities", on_stage):
            priority = build_priority_data(results, category_time, ctx, unaddressed_ops(db, ctx, results),
                                           near_roofline_lines(db, ctx, results))
            run.write("priority_data.json", priority)
            plot.submit(priority, gpu.model_dump())

        with run.step("9 validation", on_stage):
            anomalous = trace_overview.roofline_anomalies(db, trace_id, platform)
            validation = validate(results, priority, category_time, anomalous, ctx)
            run.write("metadata/validation.json", validation)
            run.warnings.extend(validation.problems)

        with run.step("11 report", on_stage):
            # rendered while the plot child draws; the PNG goes in last
            fields = _report_inputs(db, trace, trace_id, platform, platform_spec, mode, mode_reason,
                                    gpu, gate, priority, results, model_info, run.warnings)
            if op_comparison is not None and options.compare is not None and gpu2 is not None:
                extra = report_fields(
                    op_comparison, gpu.total_time_ms, options.compare.name, gpu2.model_dump(),
                    category_times(db, trace_id, platform), categories2, platform_specs[op_comparison.platform2])
                fields.update(extra, reproduce_sql=fields["reproduce_sql"] + extra["reproduce_sql"])
            fields.update(platform_title=platform_title, platform2_title=platform2_title)
            markdown = render_analysis(ReportInputs(**fields))
            run.write("analysis.html", render_analysis_html(markdown, f"{trace.name}: TraceLake analysis"))
            png = plot.result()
            run.write("perf_improvement.png", png)
            markdown = embed_plot(markdown, png)
            problems = validate_analysis(markdown, priority)
            run.write("analysis.md", markdown)
    finally:
        db.close()

    record.stage(ctx, priority, results, out_dir)
    run.metadata.finished_at = datetime.now(UTC)
    run.metadata.warnings = list(run.warnings)
    run.write("metadata/run.json", run.metadata)
    return AnalysisOutcome(trace_id, platform, source, trace2_id, platform2, out_dir, out_dir / "analysis.md",
                           run.warnings, problems)


def _report_inputs(db: duckdb.DuckDBPyConnection, trace: Path, trace_id: str, platform: str,
                   platform_spec: dict[str, Any], mode: str, mode_reason: str, gpu: GpuUtilization,
                   gate: QualityGate, priority: Any, results: list[AgentResult], model_info: Any,
                   warnings: list[str]) -> dict[str, Any]:
    top_operations = (trace_overview.top_operations(db, trace_id, platform, priority.e2e_time_ms)
                      if gate.gpu_events_present else trace_overview.top_cpu_operations(db, trace_id))
    ranked = [f for f in priority.findings if f.impact_score is not None]
    top_category = ranked[0].category if ranked else (top_operations[0]["category"] if top_operations else "n/a")
    failed = [r for r in results if r.status == "ERROR"]
    report_warnings = list(warnings) + [f"agent {r.agent} did not complete: {r.error}" for r in failed
                                        if not any(r.agent in w for w in warnings)]
    return {
        "title_model": model_info.display_name,
        "platform": platform, "platform2": None, "comparison_scope": "standalone",
        "mode": mode or "unknown", "mode_reason": mode_reason, "trace_name": trace.name, "trace_id": trace_id,
        "ts_base_us": ts_base_us(db, trace_id),
        "gpu_utilization": gpu.model_dump(), "gpu_utilization2": None, "top_bottleneck_category": top_category,
        "priority": priority, "agent_results": results, "top_operations": top_operations,
        "model_info": model_info, "platform_spec": platform_spec,
        "quality_checks": [c.model_dump() for c in gate.checks], "warnings": report_warnings,
        "skipped_steps": gate.skipped_steps, "workload_limits": gate.workload_limits,
        # without CPU ops the kernels' categories (from their names) are what the trace still tells
        "kernel_categories": (trace_overview.kernel_categories(db, trace_id)
                              if gate.gpu_events_present and not gate.cpu_ops_present else []),
        "reproduce_sql": trace_overview.reproduce_queries(trace_id, platform),
        "plot_png_base64": PLOT_PENDING,
        "relabelled_ops_note": None,
        "phases": trace_overview.trace_phases(db, trace_id),
    }
