"""`tracelake export TRACE`: a window of one stored trace (a finding's, a step's, START:END or the whole
trace) as a Chrome trace for Perfetto (reports/trace_export.py), or a job's ranks as one
(tracelake/job_commands.py)."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from tracelake.core.errors import TraceLakeError
from tracelake.output import write_json_file
from tracelake.warehouse import Warehouse


def _finding_rank(finding: str | None) -> int | None:
    if finding is None:
        return None
    match = re.fullmatch(r"[Pp]?(\d+)", finding.strip())
    if match is None:
        raise typer.BadParameter(f"{finding!r} is not P<n> (e.g. P1)", param_hint="--finding")
    return int(match.group(1))


def check_export_options(out: Path, finding: str | None, window: str | None, step: int | None, force: bool) -> None:
    """Refuse conflicting windows and an --out that is not JSON or exists (without --force)."""
    chosen = [name for name, value in (("--finding", finding), ("--window", window), ("--step", step)) if value is not None]
    if len(chosen) > 1:
        raise typer.BadParameter(f"give one of --finding, --window and --step, not {' and '.join(chosen)}")
    _finding_rank(finding)
    if not out.name.endswith((".json", ".json.gz")):
        raise typer.BadParameter(f"{out} does not end in .json or .json.gz", param_hint="--out")
    if out.exists() and not force:
        raise TraceLakeError(f"{out} exists; pass --force to replace it, or choose another --out")


def export_command(wh: Warehouse, trace: str, out: Path, finding: str | None, window: str | None, step: int | None,
                   critical_path: bool) -> str:
    """Write the export and return the line to print."""
    from tracelake.job_commands import export_job_command  # noqa: PLC0415
    from tracelake.reports.trace_export import (  # noqa: PLC0415
        FINDINGS_PID,
        finding_window,
        parse_window,
        step_window,
        trimmed_trace,
        whole_trace,
        within_trace,
    )
    from tracelake.selectors import resolve_traces  # noqa: PLC0415

    if trace.strip().lower().startswith("job:"):  # a job: its ranks on the job clock (tracelake/job_commands.py)
        if finding is not None or step is not None or critical_path:
            raise typer.BadParameter("a job is exported whole or by --window START:END (job-clock us)")
        return export_job_command(wh, trace, window, out)
    trace_ids = resolve_traces(wh, trace, ingest_new=False)
    if len(trace_ids) != 1:
        raise TraceLakeError(f"{trace!r} names {len(trace_ids)} traces; export takes one (give its trace id)")
    trace_id = trace_ids[0]
    rank = _finding_rank(finding)
    with wh.connect_read_only() as con:
        if rank is not None:
            chosen_window = finding_window(con, trace_id, rank)
        elif step is not None:
            chosen_window = step_window(con, trace_id, step)
        elif window is not None:
            chosen_window = within_trace(con, trace_id, parse_window(window))
        else:
            chosen_window = whole_trace(con, trace_id)
        document = trimmed_trace(con, trace_id, chosen_window, critical_path)
    write_json_file(out, document)
    events = sum(1 for e in document["traceEvents"] if e.get("pid") != FINDINGS_PID and e["ph"] != "M")
    marked = sum(1 for e in document["traceEvents"] if "critical_path" in (e.get("args") or {}))
    path_note = f", {marked} on the critical path" if critical_path else ""
    return (f"wrote {out}: {chosen_window.label}, {events} events{path_note} in {chosen_window.start_us:.1f}-"
            f"{chosen_window.end_us:.1f} us ({(chosen_window.end_us - chosen_window.start_us) / 1000:.3f} ms); "
            "open it in https://ui.perfetto.dev or chrome://tracing")
