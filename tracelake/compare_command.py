"""The body of `tracelake compare` (cli.py registers it): resolve the two sides, pair their traces
by workload and judge each pair (analyzers/workload_pairs.py), print the verdict, exit with its code.

Exit codes: 0 no regression, 1 regression, 2 bad input, 3 internal error (cli.py), 4 not comparable:
no workload of one side is in the other, or no pair shares enough op signatures for a verdict. CI
reads 1 as "slower"; a comparison of different work must not read as one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from tracelake.cli_exit import EXIT_FAILED
from tracelake.core.errors import WarehouseError

if TYPE_CHECKING:
    from tracelake.analyzers.regression import CompareSettings
    from tracelake.analyzers.workload_pairs import WorkloadComparison
    from tracelake.warehouse import Warehouse

EXIT_NOT_COMPARABLE = 4


def compare_selectors(wh: Warehouse, baseline: str, candidate: str, config: CompareSettings, jobs: int,
                      ingest_new: bool = True) -> WorkloadComparison:
    """The workload comparison of `candidate` against `baseline` (each a trace selector; trace files
    not yet in the warehouse are ingested unless `ingest_new` is off). Raises NotComparableError
    when no workload pairs (`tracelake mcp`'s compare tool calls it too)."""
    import duckdb  # noqa: PLC0415 - imported once the command runs (cli.py)

    from tracelake.analyzers.workload_pairs import compare_workloads  # noqa: PLC0415
    from tracelake.selectors import resolve_traces  # noqa: PLC0415

    try:
        baseline_ids = resolve_traces(wh, baseline, jobs, ingest_new=ingest_new)
        candidate_ids = resolve_traces(wh, candidate, jobs, ingest_new=ingest_new)
        with wh.connect_read_only() as con:
            result = compare_workloads(con, baseline_ids, candidate_ids, config)
            result.warehouse_snapshot = wh.snapshot_of(con)
    except duckdb.CatalogException as exc:
        missing = str(exc).splitlines()[0]
        raise WarehouseError(f"warehouse {wh.root} lacks a table compare reads ({missing}); it was built by an "
                             f"older TraceLake: run `tracelake build --warehouse {wh.root}`") from None
    for pair in result.pairs:
        pair.verdict.warehouse_snapshot = result.warehouse_snapshot
    return result


def run_compare(wh: Warehouse, baseline: str, candidate: str, config: CompareSettings, output_format: str,
                jobs: int) -> None:
    """Print the comparison of `baseline` and `candidate` and exit with its code."""
    from tracelake.analyzers.workload_pairs import NotComparableError  # noqa: PLC0415
    from tracelake.job_commands import compare_jobs_command, job_comparison_sides  # noqa: PLC0415
    from tracelake.reports.regression_md import render_workload_comparison_md  # noqa: PLC0415

    job_sides = job_comparison_sides(baseline, candidate)  # job:A job:B (tracelake/job_commands.py)
    if job_sides is not None:
        printed, regressed = compare_jobs_command(wh, job_sides, config.threshold_percent, output_format)
        print(printed, end="")
        raise typer.Exit(EXIT_FAILED if regressed else 0)
    try:
        result = compare_selectors(wh, baseline, candidate, config, jobs)
    except NotComparableError as refusal:
        print(f"tracelake: {refusal}", file=sys.stderr)
        raise typer.Exit(EXIT_NOT_COMPARABLE) from None
    print(result.model_dump_json(indent=1) if output_format == "json" else render_workload_comparison_md(result),
          end="\n" if output_format == "json" else "")
    for pair in result.pairs:
        if pair.verdict.device_warning:
            prefix = "" if len(result.pairs) == 1 else f"{pair.workload}: "
            print(f"warning: {prefix}{pair.verdict.device_warning}", file=sys.stderr)
    if result.regression:
        raise typer.Exit(EXIT_FAILED)
    if result.verdict == "not_comparable":
        print(f"tracelake: not comparable: {result.summary.split(': ', 1)[-1]}", file=sys.stderr)
        raise typer.Exit(EXIT_NOT_COMPARABLE)
