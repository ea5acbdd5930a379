"""The steps of a job's analysis (tracelake/job_pipeline.py lists them): ingest every rank, assign the
job (ranks, nodes, membership tags), write each rank's usual report into `ranks/rank<r>/`, then the
job's findings and report (thin calls of tracelake/job_steps.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from tracelake.analysis_runner import AnalysisRunner
from tracelake.analyze_options import AnalyzeOptions
from tracelake.analyzers.contracts import Finding
from tracelake.ingestion import IngestProgress
from tracelake.job_assembly import JobAssembly
from tracelake.job_steps import run_job_agents, write_job_report
from tracelake.jobs import JobInput, assign_job, ingest_job
from tracelake.pipeline import run_analysis
from tracelake.reports.collective_csvs import write_collective_csvs
from tracelake.reports.report_inputs import RankOfJob
from tracelake.warehouse import Warehouse

RANKS_FOLDER = "ranks"
COLLECTIVE_FOLDER = "collective_report"


@dataclass(frozen=True)
class RankTraces:
    """The job's files and the trace id of each."""

    trace_ids: dict[Path, str]

    def path_of(self, trace_id: str) -> Path:
        return next(path for path, tid in self.trace_ids.items() if tid == trace_id)


@dataclass(frozen=True)
class RankReport:
    rank: int
    trace_id: str
    trace_path: Path
    platform: str
    platform_source: str
    folder: str  # below the job's output folder: ranks/rank<r>
    problems: list[str]  # what validate_analysis found in its analysis.md


def rank_folder(rank: int) -> str:
    return f"{RANKS_FOLDER}/rank{rank}"


def ingest_ranks(job_input: JobInput, options: AnalyzeOptions, warehouse: Warehouse,
                 progress: IngestProgress | None) -> RankTraces:
    """Every rank file ingested, decoded on `options.jobs` processes at once."""
    return RankTraces(ingest_job(job_input, warehouse, options.jobs, progress))


def assign_ranks(warehouse: Warehouse, job_input: JobInput, rank_traces: RankTraces, options: AnalyzeOptions,
                 runner: AnalysisRunner) -> JobAssembly:
    """Each file's rank and node, checked and written as the job's membership tags (docs/jobs.md)."""
    assembly, notes = assign_job(warehouse, job_input, rank_traces.trace_ids, options.gpus_per_node)
    missing = assembly.missing_ranks
    if missing:
        notes.append(f"the job has {len(assembly.members)} of its {assembly.world_size} ranks "
                     f"(missing: {assembly.missing_ranks_text}); it is analyzed for the "
                     "ranks present")
    runner.warnings += notes
    runner.metadata = runner.metadata.model_copy(update={
        "job": assembly.name, "world_size": assembly.world_size, "ranks": [m.rank for m in assembly.members],
        "missing_ranks": missing, "node_count": assembly.node_count})
    runner.write("metadata/run.json", runner.metadata)
    return assembly


def write_rank_reports(warehouse: Warehouse, job: JobAssembly, rank_traces: RankTraces, options: AnalyzeOptions,
                       out_dir: Path, runner: AnalysisRunner, on_stage: Callable[[str], None]) -> list[RankReport]:
    """Each rank's usual report (tracelake/pipeline.py) in ranks/rank<r>/, its header linking to the job's."""
    reports: list[RankReport] = []
    for member in job.members:
        folder = rank_folder(member.rank)
        rank_options = replace(
            options, out_dir=runner.staging / folder, report_home=out_dir / folder, force=False,
            job=RankOfJob(name=job.name, rank=member.rank, world_size=job.world_size), job_name=None,
            gpus_per_node=None)
        (runner.staging / folder).parent.mkdir(parents=True, exist_ok=True)
        label = f"rank {member.rank} ({len(reports) + 1} of {len(job.members)})"
        with runner.timed(f"rank {member.rank} report"):
            outcome = run_analysis(rank_traces.path_of(member.trace_id), warehouse, rank_options, None,
                                   lambda stage, label=label: on_stage(f"{label}: {stage}"))  # type: ignore[misc]
        runner.warnings += [f"rank {member.rank}: {warning}" for warning in outcome.warnings]
        reports.append(RankReport(member.rank, member.trace_id, rank_traces.path_of(member.trace_id),
                                  outcome.platform, outcome.platform_source, folder, outcome.report_problems))
    return reports


def open_job_marts(warehouse: Warehouse, job: JobAssembly, runner: AnalysisRunner) -> duckdb.DuckDBPyConnection:
    """The read-only connection the job's own steps share (the marts of its ranks, with the job's tags)."""
    # the job's report reads what its ranks' reports recorded
    return runner.keep_open(warehouse.connect_analysis([member.trace_id for member in job.members], reads_findings=True))


def find_job_findings(db: duckdb.DuckDBPyConnection, job: JobAssembly) -> list[Finding]:
    """The job analyzers' findings over the job marts (tracelake/job_steps.py)."""
    return run_job_agents(db, job.name)


def write_job_analysis(db: duckdb.DuckDBPyConnection, job: JobAssembly, job_findings: list[Finding],
                       rank_reports: list[RankReport], runner: AnalysisRunner) -> None:
    """The job's analysis.md, analysis.html and priority_data.json, linking to each rank's report."""
    reports = {r.rank: runner.staging / r.folder / "analysis.md" for r in rank_reports}
    runner.warnings += write_job_report(db, job.name, job_findings, reports, runner.staging)


def write_collective_report(db: duckdb.DuckDBPyConnection, job: JobAssembly, runner: AnalysisRunner) -> None:
    """TraceLens-compatible collective CSVs in collective_report/ (reports/collective_csvs.py)."""
    write_collective_csvs(db, job.name, runner.staging / COLLECTIVE_FOLDER)
