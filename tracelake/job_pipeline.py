"""The orchestrator behind `tracelake analyze JOB_DIR` (or several files): a job's analysis as a
declared sequence of steps, in the style of tracelake/pipeline.py.

Ingest every rank (in parallel), assign the job (ranks, nodes, membership tags: tracelake/jobs.py),
write each rank's usual report into `ranks/rank<r>/`, then the job's own outputs (docs/jobs.md,
"Outputs"). The output folder follows analyze's rules (tracelake/folders.py: only a new, empty or
TraceLake-written folder is replaced), is built in a staging folder beside it and swapped in at
the end: a failed or killed run leaves the previous job report whole.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracelake import __version__
from tracelake.analysis_runner import AnalysisRunner, Step, check_wiring
from tracelake.analyze_options import AnalyzeOptions
from tracelake.core.errors import BadTraceError
from tracelake.folders import FolderKind, OutputStaging, OutputTarget, claim_output_folder
from tracelake.ingestion import IngestProgress
from tracelake.job_assembly import JobAssembly
from tracelake.job_rank_steps import (
    RankReport,
    assign_ranks,
    find_job_findings,
    ingest_ranks,
    open_job_marts,
    write_collective_report,
    write_job_analysis,
    write_rank_reports,
)
from tracelake.jobs import JobInput
from tracelake.run_contracts import JobRunMetadata
from tracelake.staging import fit_name
from tracelake.warehouse import Warehouse

__all__ = ["JOB_ANALYSIS_STEPS", "JOB_FOLDER", "JobAnalysisOutcome", "default_job_out_dir", "run_job_analysis"]

# What a job's run starts from; the steps add their outputs.
JOB_RUN_INPUTS = {"job_input", "options", "warehouse", "progress", "runner", "on_stage", "out_dir"}

# The job's analysis, step by step (each step's inputs are the run's inputs and earlier outputs, by name).
JOB_ANALYSIS_STEPS = (
    Step("ingest ranks", ingest_ranks, ("job_input", "options", "warehouse", "progress"), "rank_traces",
         label="reading the ranks", releases_memory=True),
    Step("assign job", assign_ranks, ("warehouse", "job_input", "rank_traces", "options", "runner"), "job",
         label="assigning ranks and nodes"),
    Step("rank reports", write_rank_reports,
         ("warehouse", "job", "rank_traces", "options", "out_dir", "runner", "on_stage"), "rank_reports"),
    Step("open job marts", open_job_marts, ("warehouse", "job", "runner"), "db"),
    Step("job findings", find_job_findings, ("db", "job"), "job_findings", label="finding the job's findings"),
    Step("job report", write_job_analysis, ("db", "job", "job_findings", "rank_reports", "runner"),
         label="writing the job's analysis.md"),
    Step("collective report", write_collective_report, ("db", "job", "runner"),
         label="writing the collective CSVs"),
)
check_wiring(JOB_ANALYSIS_STEPS, JOB_RUN_INPUTS)

JOB_FOLDER = FolderKind(
    name="job_analysis", sign="metadata/run.json",
    entries=frozenset({"analysis.md", "analysis.html", "priority_data.json", "collective_report", "ranks", "metadata"}),
)
JOB_OUT_DIR_SUFFIX = "_job_analysis"


@dataclass
class JobAnalysisOutcome:
    job: JobAssembly
    out_dir: Path
    rank_reports: list[RankReport]
    warnings: list[str]
    report_problems: list[str]  # each rank report's, prefixed with its rank

    @property
    def analysis_md(self) -> Path | None:
        """The job's report, once the job report step writes one."""
        path = self.out_dir / "analysis.md"
        return path if path.is_file() else None


def default_job_out_dir(job: JobInput) -> Path:
    """`<folder holding the job's folder>/<job name>_job_analysis` (for files: their folder's parent)."""
    return job.root.resolve().parent / fit_name(job.name, JOB_OUT_DIR_SUFFIX)


def _claim_out_dir(job: JobInput, warehouse: Warehouse, options: AnalyzeOptions) -> OutputTarget:
    return claim_output_folder(
        options.out_dir or default_job_out_dir(job), JOB_FOLDER,
        protected=[job.root, *job.files, warehouse.root],
        reserved=warehouse.reserved_folders(), force=options.force)


def _refuse_unjoblike(options: AnalyzeOptions) -> None:
    """Options that describe one trace, not a job: refused clearly (never silently ignored)."""
    given = [flag for flag, value in (("--compare", options.compare), ("--platform2", options.platform2),
                                      ("--capture-folder", options.capture_folder),
                                      ("--capture-folder2", options.capture_folder2)) if value is not None]
    if given:
        raise BadTraceError(f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} one trace; a job's analysis "
                            "takes none (compare two jobs with `tracelake compare`)")


def run_job_analysis(job_input: JobInput, warehouse: Warehouse, options: AnalyzeOptions,
                     progress: IngestProgress | None = None,
                     on_stage: Callable[[str], None] = lambda _: None) -> JobAnalysisOutcome:
    _refuse_unjoblike(options)
    target = _claim_out_dir(job_input, warehouse, options)
    out_dir = target.path
    try:
        output = OutputStaging(target)
    except OSError as exc:
        raise BadTraceError(f"cannot write the job's report next to {out_dir} ({exc.strerror}); choose a writable "
                            "folder with --out") from None
    runner = AnalysisRunner(JobRunMetadata(
        tracelake_version=__version__, trace_path=str(job_input.root.resolve()), out_dir=str(out_dir),
        warehouse=str(warehouse.root), started_at=datetime.now(UTC), agents_runner=options.agents,
        job=job_input.name), output.content, on_stage)
    try:
        inputs = {"job_input": job_input, "options": options, "warehouse": warehouse, "progress": progress,
                  "runner": runner, "on_stage": on_stage, "out_dir": out_dir}
        done = runner.run(JOB_ANALYSIS_STEPS, inputs)
        reports: list[RankReport] = done["rank_reports"]
        runner.metadata = runner.metadata.model_copy(update={"rank_reports": [r.folder for r in reports]})
        runner.finish()
        output.publish()
        return JobAnalysisOutcome(done["job"], out_dir, reports, runner.warnings,
                                  [f"rank {r.rank}: {p}" for r in reports for p in r.problems])
    finally:
        for part in (runner, output):
            part.close()
