"""`tracelake mcp`: the warehouse served read-only over the Model Context Protocol on stdio
(docs/mcp.md), for any agent runner to ask every trace at once. The answers are
tracelake/mcp_answers.py's; this module declares the tools and turns every failure into one
clear tool error (never a traceback), as the CLI turns them into one stderr line."""

# No `from __future__ import annotations` here: the SDK reads the tools' annotations (Annotated
# with their descriptions) to publish their input schemas, and they are closures.
import dataclasses
import json
import math
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from tracelake import mcp_answers as answers
from tracelake.core.errors import TraceLakeError
from tracelake.query import default_timeout

if TYPE_CHECKING:
    from tracelake.analyzers.regression import RegressionVerdict
    from tracelake.export_command import ExportRequest
    from tracelake.warehouse import Warehouse

SERVER_NAME = "tracelake"
INSTRUCTIONS = (
    "TraceLake's warehouse of PyTorch profiler traces, read-only. Start with list_traces and list_tables; "
    "describe_table gives one table's documented columns; query runs one read-only SQL statement (DuckDB) over "
    "every trace at once. Each answer names the SQL that produced it and holds one page of rows with their total.")
EXPORT_FOLDER_PREFIX = "tracelake-mcp-export-"  # a fresh folder under the system's temporary one per export

PageNumber = Annotated[int, Field(description="1-based page number.")]
PageSize = Annotated[int, Field(description=f"Rows per page (1-{answers.MAX_PAGE_ROWS}).")]
TraceSelector = Annotated[str, Field(description=(
    "A trace: its id (or a prefix of >= 6 hex digits), a trace file already ingested, or KEY=VALUE[,KEY=VALUE] tags "
    "naming one trace."))]


def _answer(run: Callable[[], dict[str, Any]]) -> CallToolResult:
    """`run()`'s answer as compact JSON text (the SDK would indent it: a third more to read) and as
    structured content; a failure becomes a ToolError of one line (the agent reads it and retries)."""
    import click  # noqa: PLC0415 - typer's; loaded by now

    try:
        answer = run()
        text = pydantic_core.to_json(answer).decode()  # NaN and infinities as null: strict JSON
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=json.loads(text))
    except ToolError:
        raise
    except click.ClickException as exc:  # the export command's usage mistakes
        raise ToolError(exc.format_message()) from None
    except TraceLakeError as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the one place a crash becomes an answer, not a traceback
        summary = (str(exc).strip().splitlines() or [""])[0]
        raise ToolError(f"internal error: {type(exc).__name__}: {summary}") from None


def _comparison(wh: "Warehouse", baseline: str, candidate: str, threshold_pct: float | None, top: int) -> dict[str, Any]:
    """The verdict `tracelake compare` prints, its headline and the `top` largest changes."""
    from tracelake.analyzers.regression import CompareSettings  # noqa: PLC0415
    from tracelake.compare_command import compare_selectors  # noqa: PLC0415
    from tracelake.job_commands import compare_jobs_command, job_comparison_sides  # noqa: PLC0415

    if threshold_pct is not None and not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise TraceLakeError(f"threshold_pct {threshold_pct:g} is not a percentage >= 0")
    if not 1 <= top <= answers.MAX_PAGE_ROWS:
        raise TraceLakeError(f"top {top} is not between 1 and {answers.MAX_PAGE_ROWS}")
    config = CompareSettings() if threshold_pct is None else CompareSettings(threshold_percent=threshold_pct)
    job_sides = job_comparison_sides(baseline, candidate)
    if job_sides is not None:
        text, regressed = compare_jobs_command(wh, job_sides, config.threshold_percent, "md")
        return {"sql": None, "regression": regressed, "report_md": text[:answers.MAX_REPORT_CHARS],
                "report_chars": len(text), "truncated": len(text) > answers.MAX_REPORT_CHARS}
    result = compare_selectors(wh, baseline, candidate, config, jobs=1, ingest_new=False)
    return {"sql": None, "verdict": result.verdict, "regression": result.regression, "summary": result.summary,
            "unpaired_baseline": [t.trace_id for t in result.unpaired_baseline],
            "unpaired_candidate": [t.trace_id for t in result.unpaired_candidate],
            "pairs": [_pair_answer(pair.workload, pair.verdict, top) for pair in result.pairs]}


def _pair_answer(workload: str, verdict: "RegressionVerdict", top: int) -> dict[str, Any]:
    """One paired workload's verdict, its headline and the `top` largest changes."""
    sides = {name: side.model_dump(include={"trace_ids", "file_names", "devices", "sample_source", "sample_count",
                                            "kernel_time_mean_ms"})
             for name, side in (("baseline", verdict.baseline), ("candidate", verdict.candidate))}
    return {"workload": workload, "verdict": verdict.verdict, "regression": verdict.regression,
            "summary": verdict.summary, "confidence": verdict.confidence, "deciding_metric": verdict.deciding_metric,
            "device_warning": verdict.device_warning, "failures": verdict.failures, **sides,
            "noise_band_percent": verdict.noise.band_percent,
            "headline": [change.model_dump(mode="json") for change in verdict.headline],
            "categories_total": len(verdict.categories),
            "categories": [change.model_dump(mode="json") for change in verdict.categories[:top]],
            "ops_total": len(verdict.ops), "ops": [change.model_dump(mode="json") for change in verdict.ops[:top]]}


def _export(wh: "Warehouse", out: str | None, request: "ExportRequest") -> dict[str, Any]:
    """`request` written to `out` (default: a new temporary folder's trace.json.gz)."""
    from tracelake.export_command import export_window  # noqa: PLC0415

    target = Path(out) if out else Path(tempfile.mkdtemp(prefix=EXPORT_FOLDER_PREFIX)) / "trace.json.gz"
    result = export_window(wh, dataclasses.replace(request, out=target))
    return {"sql": None, "out": str(result.out.resolve()), "bytes": result.out.stat().st_size, "summary": result.summary,
            "events": result.event_count, "start_us": result.start_us, "end_us": result.end_us}


def build_server(wh: "Warehouse", timeout_s: float | None = None) -> MCPServer:
    """The server over `wh` (which must exist); each SQL statement stops after `timeout_s`
    (default: `tracelake sql`'s, $TRACELAKE_SQL_TIMEOUT_SECONDS)."""
    from tracelake.api import WarehouseHandle  # noqa: PLC0415 - loads DuckDB

    limit = default_timeout() if timeout_s is None else timeout_s
    handle = WarehouseHandle(wh.root)
    server: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def read(answer: Callable[[answers.Reader], dict[str, Any]]) -> CallToolResult:
        return _answer(lambda: answers.with_reader(handle, limit, answer))

    @server.tool()
    def list_traces(page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """The traces in the warehouse (id, file, device, platform, event counts, quality verdict, tags), oldest first."""
        return read(lambda r: answers.list_traces(r, answers.page_of(page, page_size)))

    @server.tool()
    def list_jobs(page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """The multi-rank jobs (the `jobs` table: world size, ranks present and missing, nodes), by name."""
        return read(lambda r: answers.list_jobs(r, answers.page_of(page, page_size)))

    @server.tool()
    def list_tables(page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """The public tables and views, each with a one-line description (describe_table has the columns)."""
        return read(lambda r: answers.list_tables(r, answers.page_of(page, page_size)))

    @server.tool()
    def describe_table(table: Annotated[str, Field(description="A public table's name, e.g. gpu_timeline.")],
                       page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """One public table: what it holds and its columns (name, type, documented meaning)."""
        return read(lambda r: answers.describe_table(r, table, answers.page_of(page, page_size)))

    @server.tool()
    def query(sql: Annotated[str, Field(description="One read-only DuckDB statement (SELECT, DESCRIBE, SHOW, ...).")],
              page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """Run one read-only SQL statement over the warehouse (the rules of `tracelake sql`: statements that write
        or reach outside the warehouse are refused); one page of its rows and their total."""
        return read(lambda r: answers.read_only_query(r, sql, answers.page_of(page, page_size)))

    @server.tool()
    def list_findings(trace: TraceSelector,
                      finding: Annotated[str | None, Field(description="One finding of the trace's report: P<n>.")] = None,
                      page: PageNumber = 1, page_size: PageSize = answers.DEFAULT_PAGE_ROWS) -> CallToolResult:
        """A trace's ranked findings (P1 first) from its latest report, each with the SQL behind its numbers."""
        return read(lambda r: answers.trace_findings(r, trace, finding, answers.page_of(page, page_size)))

    @server.tool()
    def read_report(trace: TraceSelector,
                    section: Annotated[int | str | None, Field(description="A section's number or heading (default: all).")]
                    = None,
                    offset: Annotated[int, Field(description="Character offset into the section.")] = 0,
                    max_chars: Annotated[int, Field(description=f"At most this many characters (<= {answers.MAX_REPORT_CHARS}).")]
                    = answers.DEFAULT_REPORT_CHARS,
                    compared_with: Annotated[str | None, Field(description="Trace 2 of a comparative report.")] = None,
                    ) -> CallToolResult:
        """A chunk of a trace's report (analysis.md), with the list of its sections; next_offset reads on."""
        return read(lambda r: answers.report(r, trace, compared_with, None if section is None else str(section), offset,
                                                 max_chars))

    @server.tool()
    def compare(baseline: Annotated[str, Field(description="Baseline traces (a selector; job:NAME for a job).")],
                candidate: Annotated[str, Field(description="Candidate traces, given like the baseline.")],
                threshold_pct: Annotated[float | None, Field(description="Percent slower that is a regression.")] = None,
                top: Annotated[int, Field(description="Category and op changes listed, largest first.")]
                = answers.DEFAULT_COMPARE_ITEMS) -> CallToolResult:
        """The regression verdict of `tracelake compare`: headline GPU times, the largest category and op changes."""
        return _answer(lambda: _comparison(wh, baseline, candidate, threshold_pct, top))

    @server.tool()
    def export_window(trace: Annotated[str, Field(description="A trace selector, or job:NAME.")],
                      out: Annotated[str | None, Field(description="File to write (.json or .json.gz; default: a new "
                                                                   "temporary folder).")] = None,
                      finding: Annotated[str | None, Field(description="P<n>: that finding's window.")] = None,
                      window: Annotated[str | None, Field(description="START:END in trace microseconds.")] = None,
                      step: Annotated[int | None, Field(description="ProfilerStep#N's span.")] = None,
                      force: Annotated[bool, Field(description="Replace `out` if it exists.")] = False,
                      critical_path: Annotated[bool, Field(description="Mark the critical path's events.")] = False,
                      counters: Annotated[bool, Field(description="Add memcpy bandwidth and queue length counter tracks.")]
                      = False) -> CallToolResult:
        """Write a window of a trace as Chrome-trace JSON for Perfetto (as `tracelake export`); answers where it was
        written and what it holds, not the JSON."""
        from tracelake.export_command import ExportRequest  # noqa: PLC0415

        request = ExportRequest(trace, Path(), finding, window, step, force, critical_path, counters)
        return _answer(lambda: _export(wh, out, request))

    return server


def serve(wh: "Warehouse") -> None:
    """Serve `wh` on stdin / stdout until the client closes it. A warehouse that does not exist is
    refused before the server starts (a WarehouseError: the CLI's one stderr line)."""
    import anyio  # noqa: PLC0415 - the mcp package's event loop library

    wh.require_existing()
    server = build_server(wh)
    sys.stdout.flush()
    anyio.run(server.run_stdio_async)
