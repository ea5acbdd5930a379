"""`tracelake analyze` for now: ingest one trace, then write its TraceLens-compatible perf report."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ingest.errors import BadTraceError
from reports.perf_report import perf_report_tables, write_perf_report
from tracelake.ingestion import IngestProgress, ingest_paths
from tracelake.platforms import resolve_platform
from tracelake.warehouse import Warehouse


@dataclass(frozen=True)
class AnalysisResult:
    trace_id: str
    platform: str
    platform_detected: bool
    out_dir: Path
    files: list[str]


def default_out_dir(trace: Path) -> Path:
    return trace.resolve().parent / "analysis_output"


def analyze_trace(
    trace: Path,
    warehouse: Warehouse,
    *,
    platform: str | None,
    out_dir: Path | None,
    jobs: int,
    xlsx: bool,
    progress: IngestProgress | None = None,
) -> AnalysisResult:
    chosen = resolve_platform(platform) if platform else None  # bad names fail before any work
    if not trace.is_file():
        raise BadTraceError(f"{trace}: no such trace file; check the path")
    report = ingest_paths([trace], warehouse, {}, jobs, progress)
    if report.failed:
        raise BadTraceError(report.failed[0].message)
    trace_id = report.outcomes[0].trace_id
    assert trace_id is not None
    out = out_dir or default_out_dir(trace)
    with warehouse.connect_read_only() as con:
        detected, is_detected = con.execute(
            "select platform, platform_detected from traces where trace_id = ?", [trace_id]
        ).fetchall()[0]
        used = chosen or detected
        tables = perf_report_tables(con, trace_id, used)
    write_perf_report(tables, out / "perf_report_csvs", out / "perf_report.xlsx" if xlsx else None)
    return AnalysisResult(trace_id, used, chosen is None and is_detected, out, sorted(tables))
