"""The job side of `tracelake compare` and `tracelake export` (docs/jobs.md): `job:NAME` selectors.

`compare job:A job:B` compares two jobs (analyzers/job_compare.py); a job against a trace is
refused with one line (exit 2): a job's ranks are not repeated samples of one trace.
`export job:NAME [--window START:END]` writes the job's ranks as one Chrome trace on the job clock
(reports/trace_export.py: job_trace).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from tracelake.core.errors import TraceLakeError
from tracelake.selectors import job_name, resolve_job
from tracelake.warehouse import Warehouse


def job_comparison_sides(baseline: str, candidate: str) -> tuple[str, str] | None:
    """The two job names when both selectors are `job:NAME`; None when neither is; a one-line
    refusal when only one is."""
    names = (job_name(baseline), job_name(candidate))
    if names[0] is not None and names[1] is not None:
        return names[0], names[1]
    if names[0] is None and names[1] is None:
        return None
    job_side, other = (baseline, candidate) if names[0] is not None else (candidate, baseline)
    raise TraceLakeError(f"cannot compare job {job_side!r} with {other!r}, which is not a job: compare two jobs "
                         "(job:NAME job:NAME) or two sets of traces")


def compare_jobs_command(warehouse: Warehouse, sides: tuple[str, str], threshold_percent: float,
                         output_format: str) -> tuple[str, bool]:
    """(the text to print, whether the candidate regressed)."""
    from tracelake.analyzers.job_compare import compare_jobs  # noqa: PLC0415
    from tracelake.reports.job_compare_md import render_job_compare_md  # noqa: PLC0415

    warehouse.require_existing()
    baseline, candidate = (resolve_job(warehouse, name) for name in sides)
    with warehouse.connect_read_only() as con:
        comparison = compare_jobs(con, baseline, candidate, threshold_percent)
    text = comparison.model_dump_json(indent=1) + "\n" if output_format == "json" else render_job_compare_md(comparison)
    return text, comparison.regression


def export_job_command(warehouse: Warehouse, selector: str, window: str | None, out: Path) -> str:
    """Write the job's window to `out` (gzip when it ends in .gz); returns the line to print."""
    from tracelake.reports.trace_export import job_trace, parse_window  # noqa: PLC0415
    from tracelake.staging import replace_file  # noqa: PLC0415

    name = job_name(selector)
    if name is None:
        raise TraceLakeError(f"{selector!r} is not job:NAME")
    warehouse.require_existing()
    job_id = resolve_job(warehouse, name)
    with warehouse.connect_read_only() as con:
        export = job_trace(con, job_id, parse_window(window) if window is not None else None)
    data = export.text.encode()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_file(out, gzip.compress(data) if out.name.endswith(".gz") else data)
    except OSError as exc:
        raise TraceLakeError(f"cannot write {out} ({exc.strerror}); choose a writable --out") from None
    w = export.window
    return (f"wrote {out}: job {job_id}, {export.rank_count} ranks, {export.event_count} events in "
            f"{w.start_us:.1f}-{w.end_us:.1f} us of the job clock ({(w.end_us - w.start_us) / 1000:.3f} ms); "
            "open it in https://ui.perfetto.dev or chrome://tracing")
