"""`tracelake export` (and `tracelake mcp`'s export tool): write a window of a stored trace, or of a
job, as Chrome-trace JSON (reports/trace_export.py makes the document)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracelake.core.errors import TraceLakeError

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse


@dataclass(frozen=True)
class ExportRequest:
    trace: str  # a stored-trace selector, or job:NAME
    out: Path
    finding: str | None = None  # P<n>
    window: str | None = None  # START:END in trace microseconds
    step: int | None = None  # ProfilerStep#N
    force: bool = False
    critical_path: bool = False  # mark the critical_path mart's nodes and chain them with flow arrows
    # bandwidth and queue-length counter tracks (reports/trace_counters.py); off by default, as HTA
    # writes them into a separate augmented trace: they add ~2 events per kernel (each launch and
    # start changes its stream's queue), about doubling the GPU side of an export
    counters: bool = False


@dataclass(frozen=True)
class ExportResult:
    out: Path
    summary: str  # the line `tracelake export` prints
    event_count: int | None  # the trace's events written (None for a job: its summary counts them)
    start_us: float | None
    end_us: float | None


def _finding_rank(finding: str | None) -> int | None:
    if finding is None:
        return None
    match = re.fullmatch(r"[Pp]?(\d+)", finding.strip())
    if match is None:
        raise typer.BadParameter(f"{finding!r} is not P<n> (e.g. P1)", param_hint="--finding")
    return int(match.group(1))


def export_window(wh: Warehouse, request: ExportRequest) -> ExportResult:
    """Write the requested window (a finding's, a step's, START:END, or the whole trace); a usage
    mistake is typer.BadParameter, anything else the user can fix a TraceLakeError."""
    from tracelake.job_commands import export_job_command  # noqa: PLC0415
    from tracelake.output import write_json_file  # noqa: PLC0415
    from tracelake.reports.trace_counters import COUNTER_CATEGORY, counter_summary  # noqa: PLC0415
    from tracelake.reports.trace_export import (  # noqa: PLC0415
        FINDINGS_PID,
        finding_window,
        parse_window,
        step_window,
        trimmed_trace,
        whole_trace,
        within_trace,
    )
    from tracelake.selectors import resolve_one_trace  # noqa: PLC0415

    chosen = [name for name, value in (("--finding", request.finding), ("--window", request.window),
                                       ("--step", request.step)) if value is not None]
    if len(chosen) > 1:
        raise typer.BadParameter(f"give one of --finding, --window and --step, not {' and '.join(chosen)}")
    rank = _finding_rank(request.finding)
    out = request.out
    if not out.name.endswith((".json", ".json.gz")):
        raise typer.BadParameter(f"{out} does not end in .json or .json.gz", param_hint="--out")
    if out.exists() and not request.force:
        raise TraceLakeError(f"{out} exists; pass --force to replace it, or choose another --out")
    if request.trace.strip().lower().startswith("job:"):  # a job: its ranks on the job clock (tracelake/job_commands.py)
        if rank is not None or request.step is not None or request.critical_path or request.counters:
            raise typer.BadParameter("a job is exported whole or by --window START:END (job-clock us), without "
                                     "--critical-path or --counters")
        return ExportResult(out, export_job_command(wh, request.trace, request.window, out), None, None, None)
    trace_id = resolve_one_trace(wh, request.trace, "export")
    with wh.connect_read_only() as con:
        if rank is not None:
            window = finding_window(con, trace_id, rank)
        elif request.step is not None:
            window = step_window(con, trace_id, request.step)
        elif request.window is not None:
            window = within_trace(con, trace_id, parse_window(request.window))
        else:
            window = whole_trace(con, trace_id)
        document = trimmed_trace(con, trace_id, window, request.critical_path, request.counters)
    write_json_file(out, document)
    counters = [e for e in document["traceEvents"] if e.get("cat") == COUNTER_CATEGORY]
    events = sum(1 for e in document["traceEvents"]
                 if e.get("pid") != FINDINGS_PID and e["ph"] != "M" and e.get("cat") != COUNTER_CATEGORY)
    marked = sum(1 for e in document["traceEvents"] if "critical_path" in (e.get("args") or {}))
    path_note = f", {marked} on the critical path" if request.critical_path else ""
    path_note += counter_summary(counters) if request.counters else ""
    summary = (f"wrote {out}: {window.label}, {events} events{path_note} in {window.start_us:.1f}-{window.end_us:.1f} us "
               f"({(window.end_us - window.start_us) / 1000:.3f} ms); open it in https://ui.perfetto.dev or chrome://tracing")
    return ExportResult(out, summary, events, window.start_us, window.end_us)
