"""The orchestrator behind `tracelake analyze`: the analysis as a declared sequence of steps.

One trace load (the ingest); everything after it reads the warehouse: the trace's facts once, then
the agents, the claims and ranking of their findings, the report and its record in the warehouse.
The output folder is checked before any work (only a new, empty or TraceLake-written folder is
replaced: tracelake/folders.py), built in a staging folder beside it and swapped in at the end, so
a re-run replaces it cleanly and a failed or killed run leaves the previous report intact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracelake import __version__
from tracelake.analysis_facts import AnalysisFacts
from tracelake.analysis_record import ReportRecord
from tracelake.analysis_runner import AnalysisRunner, Step, check_wiring
from tracelake.analyze_options import AnalyzeOptions
from tracelake.core.errors import BadTraceError
from tracelake.crashpoints import crash_point
from tracelake.finding_steps import (
    claim_findings,
    rank_findings,
    run_compute_agents,
    run_system_agents,
    validate_findings,
)
from tracelake.folders import FolderKind, OutputStaging, OutputTarget, claim_output_folder
from tracelake.graph_captures import CaptureFile, read_capture_folder
from tracelake.ingestion import IngestProgress
from tracelake.platforms import resolve_platform
from tracelake.report_steps import record_analysis, write_analysis_report
from tracelake.run_contracts import RunMetadata
from tracelake.staging import fit_name
from tracelake.trace_steps import (
    TraceIds,
    identify_trace_model,
    ingest_traces,
    open_marts,
    read_facts,
    write_category_data,
    write_perf_reports,
)
from tracelake.warehouse import Warehouse

__all__ = ["ANALYSIS_FOLDER", "ANALYSIS_STEPS", "AnalysisOutcome", "AnalyzeOptions", "default_out_dir", "run_analysis"]

# What a run starts from; the steps add their outputs.
RUN_INPUTS = {"trace", "compare", "options", "warehouse", "progress", "captures", "chosen_platforms", "runner",
              "record", "out_dir"}

# The analysis, step by step: each step's function takes the run's inputs and the outputs of the
# steps before it, by name. Every step reads the one connection "open warehouse" opens (a step
# beside others, or an agent, on a cursor of it): one snapshot, and on a lakehouse one working
# copy. The system agents and the model identification read only the marts, so they run in the
# background beside the perf report and the category data; the model identification starts after
# the perf report, not beside it, and has finished before the compute agents start: three streams
# of queries at once set the analysis' peak RSS (55 MB trace, bench/analyze.py).
ANALYSIS_STEPS = (
    Step("ingest", ingest_traces, ("trace", "options", "warehouse", "progress", "captures"), "traces",
         label="reading the trace", releases_memory=True),
    Step("open warehouse", open_marts, ("warehouse", "traces", "runner"), "db"),
    Step("trace facts", read_facts, ("db", "trace", "traces", "options", "chosen_platforms", "runner"), "facts",
         label="checking the trace"),
    Step("system agents", run_system_agents, ("db", "facts", "options", "runner"), "system_results",
         label="analyzing idle time, transfers and fusion", background=True, releases_memory=True),
    Step("perf report", write_perf_reports, ("db", "facts", "options", "runner"),
         label="writing the perf report", releases_memory=True),
    Step("model identification", identify_trace_model, ("db", "facts", "runner"), "model_info",
         label="identifying the model", background=True),
    Step("category data", write_category_data, ("db", "trace", "facts", "runner"), "categories",
         label="summarizing op categories"),
    Step("compute agents", run_compute_agents,
         ("db", "facts", "options", "system_results", "categories", "runner"), "agents",
         label="analyzing kernels by category", after=("model_info",)),
    Step("claims", claim_findings, ("db", "agents", "options", "runner"), "findings",
         label="attributing each GPU event to one finding", releases_memory=True),
    Step("ranking", rank_findings, ("db", "agents", "findings", "facts", "runner"), "priority",
         label="ranking the findings"),
    Step("validation", validate_findings, ("db", "agents", "findings", "priority", "runner"),
         label="checking the findings add up"),
    Step("report", write_analysis_report,
         ("db", "trace", "compare", "facts", "categories", "priority", "findings", "model_info", "options", "runner"),
         "problems",
         label="writing analysis.md"),
    Step("record", record_analysis, ("record", "agents", "priority", "findings", "out_dir")),
)
check_wiring(ANALYSIS_STEPS, RUN_INPUTS)


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
        reserved=warehouse.reserved_folders(),
        force=options.force)


def _capture_links(trace: Path, options: AnalyzeOptions) -> dict[Path, list[CaptureFile]]:
    links = {}
    for replay, folder in ((trace, options.capture_folder), (options.compare, options.capture_folder2)):
        if replay is not None and folder is not None:
            links[replay] = read_capture_folder(folder)
    return links


def _folder_given(folder: Path) -> str:
    """run_analysis reports on one trace; a folder is a job (tracelake/job_pipeline.py)."""
    return (f"{folder} is a folder; run_analysis reports on one trace file: `tracelake analyze {folder}` "
            "(run_job_analysis) analyzes its traces as the ranks of one job")


def run_analysis(
    trace: Path,
    warehouse: Warehouse,
    options: AnalyzeOptions,
    progress: IngestProgress | None = None,
    on_stage: Callable[[str], None] = lambda _: None,
) -> AnalysisOutcome:
    chosen_platforms = (resolve_platform(options.platform) if options.platform else None,
                        resolve_platform(options.platform2) if options.platform2 else None)
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
    home = options.report_home or out_dir  # a job's rank report is built where it will not stay
    runner = AnalysisRunner(RunMetadata(
        tracelake_version=__version__, trace_path=str(trace.resolve()), out_dir=str(home),
        warehouse=str(warehouse.root), started_at=datetime.now(UTC),
        agents_runner=options.agents, comparison_scope="comparative" if options.compare else "standalone",
        trace2_path=str(options.compare.resolve()) if options.compare else None), output.content, on_stage)
    try:
        outcome = _analyze(trace, warehouse, options, out_dir, chosen_platforms, runner, record, progress, captures)
        record.decide(output.content / "analysis.md")  # the rows land with this report, or not at all
        crash_point("report-staged")
        output.publish()
        crash_point("report-published")
        record.commit()
        return outcome
    finally:
        for part in (runner, output, record):  # the record last: it keeps its rows if the report is in place
            part.close()


def _analyze(trace: Path, warehouse: Warehouse, options: AnalyzeOptions, out_dir: Path,
             chosen_platforms: tuple[str | None, str | None], runner: AnalysisRunner, record: ReportRecord,
             progress: IngestProgress | None, captures: dict[Path, list[CaptureFile]]) -> AnalysisOutcome:
    """ANALYSIS_STEPS over the run's inputs."""
    inputs = {"trace": trace, "compare": options.compare, "options": options, "warehouse": warehouse,
              "progress": progress, "captures": captures, "chosen_platforms": chosen_platforms,
              "runner": runner, "record": record, "out_dir": options.report_home or out_dir}
    done = runner.run(ANALYSIS_STEPS, inputs)
    runner.finish()
    traces: TraceIds = done["traces"]
    facts: AnalysisFacts = done["facts"]
    second = facts.trace2
    return AnalysisOutcome(traces.trace_id, facts.trace.platform.name, facts.trace.platform.source, traces.trace2_id,
                           second.platform.name if second else None, out_dir, out_dir / "analysis.md",
                           runner.warnings, done["problems"])
