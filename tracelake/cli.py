"""The `tracelake` command line. Errors users can cause become one line on stderr and exit 2."""

from __future__ import annotations

import atexit
import gc
import json
import math
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer import Abort, Exit

from tracelake.analyzers.settings import COMPARE_THRESHOLD_PERCENT
from tracelake.cli_analyze import (
    TOP_FINDINGS_PRINTED as TOP_FINDINGS_PRINTED,
    analyze_job,
    exit_on_report_problems,
    print_ingest_report,
    print_warnings,
    top_findings,
)
from tracelake.cli_exit import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    Stopped,
    exit_if_disk_full,
    exit_if_stopped,
    exit_stopped,
    install_stop_handlers,
    permission_denied,
    stop_state,
)
from tracelake.cli_lake import AtOption, register as register_lake_commands
from tracelake.cli_options import (
    STORED_TRACE_HELP,
    TRACE_SELECTOR_HELP,
    AgentsRunner,
    CatalogOption,
    ClickException,
    CompareFormat,
    Engine,
    EngineOption,
    ListFormat,
    Mode,
    RayAddressOption,
    TableFormat,
    WarehouseOption,
    parse_tags,
    show_flags_as_flags,
    usage_message,
)
from tracelake.config import default_jobs, default_warehouse
from tracelake.core.errors import TraceLakeError, WarehouseError
from tracelake.ingest.prefetch import prefetch
from tracelake.output import render
from tracelake.progress import ProgressBar

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse

# DuckDB, pyarrow and numpy are imported by the commands that use them, after a command that
# ingests one trace file has started reading it (ingest/prefetch.py).

# gen0 / gen1 / gen2 thresholds of the cyclic collector; CPython's default is (700, 10, 10)
GC_THRESHOLDS = (100_000, 20, 20)
EXIT_COMPARE_CRASHED = 3  # `compare` keeps 1 for "regression": a crash must not read as a verdict in CI

show_flags_as_flags()
app = typer.Typer(add_completion=True, no_args_is_help=True, help=__doc__,
                  context_settings={"help_option_names": ["-h", "--help"]})
_state: dict[str, object] = {"debug": False}


def _warehouse(path: Path | None, catalog: str | None = None) -> Warehouse:
    from tracelake.lakehouse import open_warehouse  # noqa: PLC0415 - see the note on the imports

    return open_warehouse(path or default_warehouse(), catalog)


register_lake_commands(app, _warehouse)


def _imported_for_good() -> None:
    """What is imported by now lives as long as the process: the cyclic collector skips it."""
    gc.freeze()


def _print_version(value: bool) -> None:
    if value:
        from tracelake import __version__  # noqa: PLC0415

        print(f"tracelake {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors (accepted anywhere on the line).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """TraceLake: PyTorch profiler traces into a queryable warehouse and a performance report."""
    _state["debug"] = _state.get("debug") or debug


@app.command("help", epilog="Example: tracelake help analyze")
def help_command(
    command: Annotated[str | None, typer.Argument(help="The command to explain (default: all of them).")] = None,
) -> None:
    """Show the help of a command, or the list of commands."""
    raise typer.Exit(app(args=[command, "--help"] if command else ["--help"], prog_name="tracelake",
                         standalone_mode=False) or EXIT_OK)


@app.command(epilog='Example: tracelake ingest runs/ --tag model=bert --tag run=nightly-42;  a job\'s ranks: '
                     'tracelake ingest runs/job42/ --job job42')
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Trace files (.json, .json.gz) or folders of them.")],
    warehouse: WarehouseOption = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="KEY=VALUE label for these traces (repeatable).")] = None,
    job: Annotated[str | None, typer.Option("--job", help=(
        "The traces are the ranks of one job of this name (else refused); without it, a folder whose traces are "
        "the ranks of one job is tagged as that job, named after the folder."))] = None,
    gpus_per_node: Annotated[int | None, typer.Option(
        "--gpus-per-node", min=1, help="The job's node of each rank: rank // N (the traces must be one job).")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", min=1, help="Parallel parse workers (default: cores).")] = None,
    catalog: CatalogOption = None,
    engine: EngineOption = Engine.local,
    ray_address: RayAddressOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Ingest traces into the warehouse; the marts are up to date when it returns. The ranks of one
    job are tagged as that job (job, job_rank, job_node, ...: docs/jobs.md)."""
    if len(paths) == 1:
        prefetch(paths[0])
    from tracelake.ingestion import ingest_paths  # noqa: PLC0415 - see the note on the imports
    from tracelake.jobs import JOB_TAGS, check_job_name, recognize_jobs  # noqa: PLC0415
    from tracelake.ray_engine import staging_engine  # noqa: PLC0415 - imports Ray itself only for --engine ray

    _imported_for_good()
    tags = parse_tags(tag or [])
    managed = sorted(set(tags) & set(JOB_TAGS))
    if managed:
        raise typer.BadParameter(f"{', '.join(managed)} {'is a job tag' if len(managed) == 1 else 'are job tags'}, "
                                 "written from the traces themselves; name a job with --job NAME", param_hint="--tag")
    if job is not None:
        check_job_name(job)
    wh = _warehouse(warehouse, catalog)
    show_progress = sys.stderr.isatty() and not quiet
    with staging_engine(engine.value, ray_address, jobs or default_jobs()) as cluster, ProgressBar(show_progress) as progress:
        report = ingest_paths(paths, wh, tags, jobs or default_jobs(), progress, engine=cluster)
    print_ingest_report(report, quiet)
    if report.failed:
        raise typer.Exit(EXIT_BAD_INPUT)
    for line in recognize_jobs(paths, report, wh, job, gpus_per_node):
        print(line, file=sys.stderr if line.startswith("note: ") else sys.stdout)


@app.command(epilog='Example: tracelake analyze trace.json.gz --out report/   (then open report/analysis.md);  '
                     'a job\'s ranks: tracelake analyze runs/job42/ --gpus-per-node 8')
def analyze(
    traces: Annotated[list[Path], typer.Argument(
        metavar="TRACE", help=("A trace file (.json or .json.gz; the baseline with --compare); or a job: a folder "
                                  "of its rank traces, or several rank files (JOB_DIR, or F1 F2 ...)."))],
    job: Annotated[str | None, typer.Option(
        "--job", help="Analyze the traces as one job of this name (default: the folder's name).")] = None,
    gpus_per_node: Annotated[int | None, typer.Option(
        "--gpus-per-node", min=1, help=("A job's node of each rank: rank // N (used when the file names name no host; "
                                        "default: the trace's deviceProperties, else one node)."))] = None,
    compare: Annotated[Path | None, typer.Option(
        "--compare", help="Second trace (the target): comparative analysis against TRACE (not for a job).")] = None,
    platform: Annotated[str | None, typer.Option(
        "--platform", help="Roofline platform (default: detected from the trace; a job's ranks all take it).")] = None,
    platform2: Annotated[str | None, typer.Option(
        "--platform2", help="Platform of the --compare trace (default: detected).")] = None,
    mode: Annotated[Mode, typer.Option("--mode", help=(
        "What the run does: training | inference, with -graph for GPU graph replays (the words of runs.mode and the "
        "mode tag). auto reads runs.mode: backward-pass ops mean training; serving-engine ops, graph replays or "
        "GPU work without a backward pass mean inference. inference or inference-graph, given here, also writes "
        "TraceLens' inference perf-report layout (ops summaries per parent_module, <family>_fwd sheets)."))] = Mode.auto,
    capture_folder: Annotated[Path | None, typer.Option(
        "--capture-folder", help="Graph-capture traces for a graph-replay trace.")] = None,
    capture_folder2: Annotated[Path | None, typer.Option(
        "--capture-folder2", help="Graph-capture traces for the --compare trace.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help=(
        "Output folder (default: <trace dir>/<trace name>_analysis; a job: <folder holding JOB_DIR>/<job>_job_analysis, "
        "for files their folder's parent). Only a new, empty or TraceLake report folder is replaced; any other "
        "folder is refused."))] = None,
    force: Annotated[bool, typer.Option("--force", help=(
        "Replace a TraceLake report folder that also holds files of yours (they are kept). Never replaces a "
        "folder TraceLake did not write."))] = False,
    warehouse: WarehouseOption = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="Parse workers; a job's ranks are decoded this many at once (default: cores).")] = None,
    agents: Annotated[AgentsRunner, typer.Option(
        "--agents", help="Write findings deterministically or through --llm-cmd.")] = AgentsRunner.deterministic,
    llm_cmd: Annotated[str | None, typer.Option(
        "--llm-cmd", help="Command that reads an agent's spec + metrics on stdin and prints findings markdown.")] = None,
    xlsx: Annotated[bool, typer.Option("--xlsx", help="Also write perf_report.xlsx (one sheet per CSV).")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Analyze a trace (perf report CSVs, agents' findings, analysis.md), or a job's ranks as one job."""
    is_job = len(traces) > 1 or traces[0].is_dir() or job is not None
    if not is_job:
        prefetch(traces[0])
    from tracelake.pipeline import AnalyzeOptions, run_analysis  # noqa: PLC0415 - see the note on the imports

    _imported_for_good()

    if agents is AgentsRunner.llm and not llm_cmd:
        raise typer.BadParameter("--agents llm needs --llm-cmd", param_hint="--llm-cmd")
    if gpus_per_node is not None and not is_job:
        raise typer.BadParameter("--gpus-per-node places a job's ranks on nodes; give a folder or several rank "
                                 "files (or --job NAME)", param_hint="--gpus-per-node")
    if compare is not None and is_job:
        raise typer.BadParameter("a job's analysis takes no --compare (compare two jobs with `tracelake compare`)",
                                 param_hint="--compare")
    if compare is None and (platform2 or capture_folder2):
        raise typer.BadParameter("--platform2 and --capture-folder2 describe the --compare trace; pass --compare TRACE2",
                                 param_hint="--compare")
    if capture_folder is not None and is_job:
        raise typer.BadParameter("--capture-folder belongs to one graph-replay trace; a job's analysis takes none",
                                 param_hint="--capture-folder")
    show_progress = sys.stderr.isatty() and not quiet
    options = AnalyzeOptions(
        platform=platform, mode=mode.value, out_dir=out, jobs=jobs or default_jobs(), xlsx=xlsx,
        capture_folder=capture_folder, agents=agents.value, llm_cmd=llm_cmd,
        compare=compare, platform2=platform2, capture_folder2=capture_folder2, force=force,
        job_name=job, gpus_per_node=gpus_per_node,
    )
    if is_job:
        analyze_job(traces, options, _warehouse(warehouse), show_progress, quiet)
        return
    trace = traces[0]
    with ProgressBar(enabled=show_progress) as progress:
        outcome = run_analysis(trace, _warehouse(warehouse), options, progress, progress.stage)
    print(f"{outcome.trace_id}  {trace.name}  platform {outcome.platform} ({outcome.platform_source})")
    if compare is not None:
        print(f"{outcome.trace2_id}  {compare.name}  platform {outcome.platform2} (trace 2)")
    print(f"wrote {outcome.analysis_md}")
    for line in top_findings(outcome.out_dir / "priority_data.json"):
        print(line)
    print_warnings(outcome.warnings, quiet)
    exit_on_report_problems(outcome.report_problems)


@app.command(epilog='Example: tracelake platforms --format json')
def platforms(
    output_format: Annotated[ListFormat, typer.Option("--format", help="Output format.")] = ListFormat.table,
) -> None:
    """List the platform specs used for roofline analysis."""
    from tracelake.platforms import load_platforms  # noqa: PLC0415 - see the note on the imports

    specs = load_platforms()
    columns = ["platform", "display_name", "kind", "mem_bw_gbps", "matrix_bf16", "matrix_fp8", "vector_fp32", "source"]
    rows = [
        (p.platform, p.display_name, p.kind, p.mem_bw_gbps, p.peaks_tflops.get("matrix_bf16"),
         p.peaks_tflops.get("matrix_fp8"), p.peaks_tflops.get("vector_fp32"), p.source)
        for p in specs
    ]
    if output_format is ListFormat.json:
        print(json.dumps([p.model_dump() for p in specs], indent=1))
    else:
        print(render(columns, rows, "table"))


@app.command(epilog='Example: tracelake build --jobs 4')
def build(
    warehouse: WarehouseOption = None,
    full_refresh: Annotated[bool, typer.Option("--full-refresh", help="Rebuild every model from scratch.")] = False,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="dbt threads (models and data tests at once); default: cores.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Rebuild every model over the warehouse (on the classic layout: the dbt project, models and data tests)."""
    wh = _warehouse(warehouse)
    if not wh.trace_ids():
        wh.require_existing()
    if jobs is not None and not wh.runs_data_tests:
        raise typer.BadParameter("sets dbt's threads, which only the classic layout runs; a lakehouse warehouse is "
                                 "rebuilt from the compiled plan", param_hint="--jobs")
    wh.prepare_for_writing()
    with wh.write_lock(), ProgressBar(enabled=sys.stderr.isatty() and not quiet, counting=True) as progress:
        wh.repair()  # what a dead run left goes first: its partitions would reach the marts
        progress.stage("dbt: parsing the project")
        wh.build(run_tests=True, full_refresh=full_refresh, threads=jobs or default_jobs(),
                 on_node_done=progress.node_done)
    tested = "built and tested" if wh.runs_data_tests else "rebuilt"
    print(f"{tested} the models over {len(wh.trace_ids())} traces in {wh.root}")


def _query(wh: Warehouse, query: str, timeout_s: float = 0, snapshot: int | None = None) -> tuple[list[str], list[tuple]]:
    from tracelake.query import run_query  # noqa: PLC0415 - see the note on the imports

    return run_query(wh, query, timeout_s, snapshot)


@app.command(epilog='Example: tracelake sql "select file_name, busy_time_ms from gpu_timeline join traces using (trace_id)" '
                     '--format csv > busy.csv')
def sql(
    query: Annotated[str, typer.Argument(help="SQL over the warehouse (DuckDB dialect).")],
    warehouse: WarehouseOption = None,
    output_format: Annotated[TableFormat, typer.Option("--format", help="Output format.")] = TableFormat.table,
    timeout: Annotated[float | None, typer.Option("--timeout", help=(
        "Stop the query after this many seconds (0 = no limit; default 600, or $TRACELAKE_SQL_TIMEOUT_SECONDS)."))] = None,
    at: AtOption = None,
) -> None:
    """Run an ad-hoc SQL query against the warehouse."""
    from tracelake.query import default_timeout  # noqa: PLC0415 - see the note on the imports

    if timeout is not None and not 0 <= timeout < float("inf"):
        raise typer.BadParameter(f"{timeout:g} is not a number of seconds >= 0 (0 = no limit)", param_hint="--timeout")
    columns, rows = _query(_warehouse(warehouse), query, default_timeout() if timeout is None else timeout, at)
    print(render(columns, rows, output_format.value))


@app.command(epilog='Example: tracelake traces --format json')
def traces(
    warehouse: WarehouseOption = None,
    output_format: Annotated[ListFormat, typer.Option("--format", help="Output format.")] = ListFormat.table,
) -> None:
    """List the traces in the warehouse."""
    wh = _warehouse(warehouse)
    # (no database but committed traces is a first build that was killed: the read finishes it)
    if wh.db_path.exists() and not wh.trace_ids():
        raise WarehouseError(f"warehouse {wh.root} holds no traces yet; run `tracelake ingest TRACE --warehouse "
                             f"{wh.root}` first")
    columns, rows = _query(
        wh,
        "select trace_id, file_name, device_name, runtime, event_count, gpu_event_count, cpu_op_count, "
        "quality_verdict, tags, ingested_at from traces order by ingested_at, trace_id",
    )
    print(render(columns, rows, output_format.value))


@app.command(epilog='Example: tracelake dashboard --out site/   (then open site/index.html)')
def dashboard(
    warehouse: WarehouseOption = None,
    out: Annotated[Path | None, typer.Option("--out", help=(
        "Output folder (default: <warehouse>/dashboard). Only a new, empty or TraceLake dashboard folder is "
        "replaced; any other folder is refused."))] = None,
) -> None:
    """Write a static HTML dashboard of the warehouse's runs (index.html; opens from disk, no server)."""
    from tracelake.dashboard import write_dashboard  # noqa: PLC0415 - see the note on the imports

    print(write_dashboard(_warehouse(warehouse), out))


@app.command(epilog="Example: tracelake export 309220b5 --finding P1 --out p1.json   "
                     "(then open p1.json in ui.perfetto.dev)")
def export(
    trace: Annotated[str, typer.Argument(help="The trace (one): " + STORED_TRACE_HELP + ".")],
    out: Annotated[Path, typer.Option("--out", help="Chrome-trace JSON to write (.json, or .json.gz to compress).")],
    finding: Annotated[str | None, typer.Option(
        "--finding", help="P<n>: the window of that finding of the trace's latest report.")] = None,
    window: Annotated[str | None, typer.Option("--window", help="START:END in trace microseconds.")] = None,
    step: Annotated[int | None, typer.Option("--step", help="ProfilerStep#N's host and GPU span.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
    critical_path: Annotated[bool, typer.Option("--critical-path", help=(
        "Mark the critical path's events (args.critical_path) and chain them with flow arrows."))] = False,
    counters: Annotated[bool, typer.Option("--counters", help=(
        "Add counter tracks: memcpy bandwidth per copy kind and launch-queue length per stream."))] = False,
    warehouse: WarehouseOption = None,
) -> None:
    """Write a window of a trace (a finding's, a step's or START:END; default the whole trace) as a
    Chrome trace for Perfetto or chrome://tracing, with the findings on a track of their own."""
    from tracelake.export_command import ExportRequest, export_window  # noqa: PLC0415

    print(export_window(_warehouse(warehouse), ExportRequest(trace, out, finding, window, step, force, critical_path,
                                                                         counters)).summary)


@app.command(epilog="Example: tracelake mcp --warehouse runs/wh   (an agent runner starts it: docs/mcp.md)")
def mcp(warehouse: WarehouseOption = None) -> None:
    """Serve the warehouse read-only to an AI agent over the Model Context Protocol (stdio; docs/mcp.md)."""
    from tracelake.mcp_server import serve  # noqa: PLC0415 - see the note on the imports

    serve(_warehouse(warehouse))


@app.command("rm", epilog="Example: tracelake rm model=bert,run=nightly-41   (or a trace id, or the trace file)")
def remove(
    selectors: Annotated[list[str], typer.Argument(help="Traces to remove: " + STORED_TRACE_HELP + ".")],
    warehouse: WarehouseOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the traces it would remove; change nothing.")] = False,
) -> None:
    """Remove traces from the warehouse: their Parquet, their rows in every table and their findings."""
    from tracelake.cli_remove import remove_command  # noqa: PLC0415 - see the note on the imports

    remove_command(_warehouse(warehouse), selectors, dry_run)


@app.command(epilog="Example: tracelake tag model=bert,run=nightly-42 commit=3f2a1c --remove stale_key")
def tag(
    selector: Annotated[str, typer.Argument(help="Traces to tag: " + STORED_TRACE_HELP + ".")],
    tags: Annotated[list[str] | None, typer.Argument(help="KEY=VALUE tags to set (repeatable).")] = None,
    remove: Annotated[list[str] | None, typer.Option("--remove", help="A tag key to drop (repeatable).")] = None,
    warehouse: WarehouseOption = None,
) -> None:
    """Set or remove tags of traces already in the warehouse (model, run, commit, mode, platform, any key)."""
    from tracelake.selectors import resolve_traces  # noqa: PLC0415

    new_tags = parse_tags(tags or [])
    remove = remove or []
    if not new_tags and not remove:
        raise typer.BadParameter("give KEY=VALUE tags to set or --remove KEY", param_hint="TAGS")
    wh = _warehouse(warehouse)
    wh.require_existing()
    trace_ids = resolve_traces(wh, selector, ingest_new=False)
    from tracelake.graph_captures import check_link_tags  # noqa: PLC0415

    new_tags = check_link_tags(new_tags, wh.trace_ids(), trace_ids)
    wh.prepare_for_writing()
    with wh.write_lock():  # all traces or none, and the marts that read a changed tag re-modelled
        changed = wh.retag_traces({t: (new_tags, tuple(remove)) for t in trace_ids})
    for trace_id in trace_ids:
        print(f"{trace_id}  {'tags updated' if trace_id in changed else 'unchanged'}")


@app.command(epilog='Example: tracelake compare model=bert,run=nightly-41 model=bert,run=nightly-42 --threshold-pct 3')
def compare(
    baseline: Annotated[str, typer.Argument(help="Baseline: " + TRACE_SELECTOR_HELP + ".")],
    candidate: Annotated[str, typer.Argument(help="Candidate, given like the baseline.")],
    threshold_pct: Annotated[float | None, typer.Option(
        "--threshold-pct", help=f"Percent slower that counts as a regression (default: {COMPARE_THRESHOLD_PERCENT:g}).")] = None,
    output_format: Annotated[CompareFormat, typer.Option("--format", help="Output format.")] = CompareFormat.md,
    warehouse: WarehouseOption = None,
    jobs: Annotated[int | None, typer.Option(
        "--jobs", min=1, help="Parse workers for trace files (default: cores).")] = None,
) -> None:
    """Regression verdict for CI, like with like: the traces of the two sides are paired by workload and each
    pair judged. Exit 0 = no regression beyond the threshold, 1 = regression, 2 = bad input, 3 = internal error,
    4 = not comparable (no workload in common, or too few op signatures in common for a verdict)."""
    from tracelake.analyzers.regression import CompareSettings  # noqa: PLC0415
    from tracelake.compare_command import run_compare  # noqa: PLC0415

    if threshold_pct is not None and not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise typer.BadParameter(f"{threshold_pct:g} is not a percentage >= 0", param_hint="--threshold-pct")
    config = CompareSettings() if threshold_pct is None else CompareSettings(threshold_percent=threshold_pct)
    _state["internal_error_exit"] = EXIT_COMPARE_CRASHED
    run_compare(_warehouse(warehouse), baseline, candidate, config, output_format.value, jobs or default_jobs())


def main(argv: list[str] | None = None) -> None:
    """The console script. Run as the `tracelake` command (no `argv`), the process ends without
    the interpreter's teardown once the exit code is known and the atexit handlers ran: every file
    and warehouse connection is closed by then, and freeing a big analysis object by object took
    ~0.2 s (bench/analyze.py)."""
    try:
        _run(argv)
    except SystemExit as done:
        run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
        if argv is not None or run_exit_handlers is None:  # in-process caller, or not CPython
            raise
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if done.code is not None and not isinstance(done.code, int):
            print(done.code, file=sys.stderr)
        # the registered clean-ups still run (multiprocessing's, which dbt's worker pools need)
        run_exit_handlers()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (`| head`): nothing more to say
                pass
        os._exit(code)


def _run(argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else argv
    # The modules imported so far live as long as the process: the cyclic collector skips them from
    # here on (the commands freeze again after importing their libraries), and runs far less often.
    # Decoding and analysing allocate millions of short-lived containers, almost none in cycles
    # (55 MB trace: ingest -0.05 s, analyze -0.1 s, same RSS).
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    stop_state["stopped_by"] = None
    previous_handlers = install_stop_handlers()
    try:
        _dispatch(args)
    finally:
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def _dispatch(args: list[str]) -> None:
    _state["debug"] = "--debug" in args  # anywhere on the line, also after the command
    args = [arg for arg in args if arg != "--debug"]
    try:
        code = app(args=args, prog_name="tracelake", standalone_mode=False)
        sys.exit(code if isinstance(code, int) else EXIT_OK)
    except Stopped as stop:
        exit_stopped(stop.signum)
    except Exit as done:
        sys.exit(done.exit_code)
    except Abort:
        exit_if_stopped()
        print("tracelake: aborted", file=sys.stderr)
        sys.exit(EXIT_FAILED)
    except ClickException as exc:
        print(f"tracelake: usage error: {usage_message(exc)}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except TraceLakeError as exc:
        exit_if_stopped()  # dbt and `sql` report a signal as their own failure
        if _state["debug"]:
            raise
        exit_if_disk_full(exc)
        print(f"tracelake: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except PermissionError as exc:  # a folder or file of another user's: the user can fix that, not a crash
        exit_if_stopped()
        if _state["debug"]:
            raise
        print(f"tracelake: error: {permission_denied(exc)}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the one place that turns crashes into a line
        exit_if_stopped()  # DuckDB turns a signal during a query into its own error
        if _state["debug"]:
            raise
        exit_if_disk_full(exc)
        summary = (str(exc).strip().splitlines() or [""])[0]  # DuckDB appends the query context on more lines
        print(f"tracelake: internal error: {type(exc).__name__}: {summary} (rerun with --debug)", file=sys.stderr)
        sys.exit(int(_state.get("internal_error_exit", EXIT_FAILED)))  # type: ignore[call-overload]
