"""What `tracelake analyze` and `tracelake ingest` print: the report written, its first findings, a
job's ranks, the warnings; and the exit code a report that fails its checks sets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracelake.cli_exit import EXIT_FAILED
from tracelake.progress import ProgressBar

if TYPE_CHECKING:
    from tracelake.analyze_options import AnalyzeOptions
    from tracelake.ingestion import IngestReport
    from tracelake.warehouse import Warehouse

TOP_FINDINGS_PRINTED = 3  # analyze prints this many findings after "wrote .../analysis.md" (issue 13: a reader's first three)


def print_ingest_report(report: IngestReport, quiet: bool) -> None:
    """Each file: new, known, skipped or failed; then the totals (unless quiet)."""
    for outcome in report.outcomes:
        if outcome.status == "new":
            print(f"{outcome.trace_id}  {outcome.path.name}  {outcome.event_count} events  {outcome.seconds:.2f}s")
        elif outcome.status == "known":
            print(f"{outcome.trace_id}  {outcome.path.name}  {outcome.message}")
        elif outcome.status == "skipped":
            print(f"skipped  {outcome.path}  ({outcome.message})", file=sys.stderr)
    for outcome in report.failed:
        print(f"tracelake: error: {outcome.message}", file=sys.stderr)
    if not quiet:
        counts = {status: sum(o.status == status for o in report.outcomes) for status in ("new", "known", "skipped")}
        print(f"{len(report.new_trace_ids)} new, {counts['known']} unchanged, {counts['skipped']} skipped, "
              f"{len(report.failed)} failed in {report.seconds:.2f}s (models: {report.model_update})", file=sys.stderr)


def analyze_job(paths: list[Path], options: AnalyzeOptions, wh: Warehouse, show_progress: bool, quiet: bool) -> None:
    """`analyze JOB_DIR` / `analyze F1 F2 ...`: each rank's report and the job's (tracelake/job_pipeline.py)."""
    from tracelake.job_pipeline import run_job_analysis  # noqa: PLC0415 - see the note on the imports
    from tracelake.jobs import job_input  # noqa: PLC0415

    job = job_input(paths, options.job_name)
    with ProgressBar(enabled=show_progress) as progress:
        outcome = run_job_analysis(job, wh, options, progress, progress.stage)
    print(outcome.job.summary())
    for report in outcome.rank_reports:
        print(f"rank {report.rank}  {report.trace_id}  {report.trace_path.name}  platform {report.platform} "
              f"({report.platform_source})  {report.folder}/analysis.md")
    print(f"wrote {outcome.analysis_md or outcome.out_dir}")
    for line in top_findings(outcome.out_dir / "priority_data.json"):
        print(line)
    print_warnings(outcome.warnings, quiet)
    exit_on_report_problems(outcome.report_problems)


def print_warnings(warnings: list[str], quiet: bool) -> None:
    if not quiet:
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)


def exit_on_report_problems(problems: list[str]) -> None:
    if problems:
        for problem in problems:
            print(f"tracelake: report check failed: {problem}", file=sys.stderr)
        raise typer.Exit(EXIT_FAILED)


def top_findings(priority_json: Path) -> list[str]:
    """The first TOP_FINDINGS_PRINTED findings of priority_data.json, one line each."""
    from tracelake.analyzers.contracts import PriorityData  # noqa: PLC0415 - the CLI imports the analysis stack lazily
    from tracelake.reports.priority import finding_lines  # noqa: PLC0415

    if not priority_json.is_file():
        return []
    return finding_lines(PriorityData.model_validate_json(priority_json.read_text()), TOP_FINDINGS_PRINTED)


