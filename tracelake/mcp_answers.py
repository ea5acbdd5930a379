"""What `tracelake mcp`'s tools answer (tracelake/mcp_server.py registers them): each answer a
small JSON object that names the SQL that produced it and holds one page of rows with their
total, so an agent reads a warehouse of many traces without spending its context on it.

Every query goes through `run_on` (tracelake/query.py), the path of `tracelake sql`: the
read-only guard (tracelake/sql_guard.py), the locked-down connection and the time limit."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracelake.core.errors import TraceLakeError
from tracelake.core.sql_text import sql_literal
from tracelake.output import render
from tracelake.query import run_on
from tracelake.sql_guard import check_query
from tracelake.table_docs import PUBLIC_SCHEMA, read_docs

if TYPE_CHECKING:
    import duckdb

    from tracelake.api import WarehouseHandle
    from tracelake.warehouse import Warehouse

# A page of 50 rows of a dozen columns is a few thousand tokens: enough to answer from, small
# enough that an agent can hold several answers. 500 rows is the most one call returns.
DEFAULT_PAGE_ROWS = 50
MAX_PAGE_ROWS = 500
# A text cell longer than this is cut (an event's args, a finding's SQL is shorter): one event's
# args JSON can run to kilobytes, and a page of them would be the context an agent works in.
MAX_CELL_CHARS = 2000
# A table's one-line description in the table list: its first sentence, cut here.
MAX_SUMMARY_CHARS = 160
# Report text returned per call (about 1,000 tokens); an agent asks for the next chunk by offset.
DEFAULT_REPORT_CHARS = 4000
MAX_REPORT_CHARS = 20000
# A comparison lists this many category and op changes (the largest first) unless asked for more.
DEFAULT_COMPARE_ITEMS = 10
# Inline images (a base64 data URI can be 100 kB of one line) are replaced by a note of their size.
_DATA_URI = re.compile(r"data:[\w.+/-]+;base64,[A-Za-z0-9+/=]{64,}")
_HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)
_TRACE_COLUMNS = ("trace_id, file_name, device_name, platform, runtime, event_count, gpu_event_count, "
                  "quality_verdict, tags, ingested_at")
_FINDING_COLUMNS = ("trace_id, trace2_id, global_rank, finding_id, title, tier, category, impact_low_percent, "
                    "impact_mid_percent, impact_high_percent, recoverable_ms, claimed_ms, confidence, estimate_method, "
                    "ts_start_us, ts_end_us, evidence_sql, analysis_sql")


@dataclass(frozen=True)
class Reader:
    """One tool call's read-only cursor, locked down like `tracelake sql`'s connection."""

    wh: Warehouse
    con: duckdb.DuckDBPyConnection
    timeout_s: float

    def rows(self, sql: str) -> tuple[list[str], list[tuple]]:
        return run_on(self.con, self.wh.root, sql, self.timeout_s)


def with_reader(handle: WarehouseHandle, timeout_s: float, answer: Callable[[Reader], dict[str, Any]]) -> dict[str, Any]:
    """`answer` over a cursor of the handle's read-only connection: kept between calls (a new one
    spends about a second loading the catalog), replaced when a writer published a new snapshot."""
    cursor = handle.connection().cursor()
    try:
        return answer(Reader(handle.warehouse, cursor, timeout_s))
    finally:
        cursor.close()


@dataclass(frozen=True)
class Page:
    number: int  # 1-based
    size: int

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size


def page_of(number: int, size: int) -> Page:
    if size < 1 or size > MAX_PAGE_ROWS:
        raise TraceLakeError(f"page_size {size} is not between 1 and {MAX_PAGE_ROWS}")
    if number < 1:
        raise TraceLakeError(f"page {number} is not a page number (the first page is 1)")
    return Page(number, size)


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return value[:MAX_CELL_CHARS] + f"... ({len(value)} characters; select a substring to read more)"
    if isinstance(value, list):
        return [_cell(item) for item in value]
    if isinstance(value, dict):
        return {key: _cell(item) for key, item in value.items()}
    return value


def _records(columns: list[str], rows: list[tuple]) -> list[dict[str, Any]]:
    """Rows as JSON objects (strict JSON: NaN is null, timestamps ISO text; `tracelake sql --format json`'s)."""
    if not rows:
        return []
    return [{key: _cell(value) for key, value in record.items()} for record in json.loads(render(columns, rows, "json"))]


def _paged(total: int, page: Page, columns: list[str], rows: list[tuple], **fields: Any) -> dict[str, Any]:
    pages = max(1, math.ceil(total / page.size))
    if page.number > pages:
        raise TraceLakeError(f"page {page.number} is past the last page ({pages}: {total} rows, {page.size} a page)")
    return {**fields, "total": total, "page": page.number, "page_size": page.size, "pages": pages,
            "columns": columns, "rows": _records(columns, rows)}


def paged_select(reader: Reader, sql: str, page: Page, **fields: Any) -> dict[str, Any]:
    """One page of a SELECT's rows with their total; the answer's `sql` is the statement, `page_sql`
    what ran for the page (the statement wrapped in LIMIT / OFFSET)."""
    _, count_rows = reader.rows(f"select count(*) from (\n{sql}\n) as answer")
    total = int(count_rows[0][0])
    page_sql = f"select * from (\n{sql}\n) as answer limit {page.size} offset {page.offset}"
    columns, rows = reader.rows(page_sql)
    return _paged(total, page, columns, rows, sql=sql, page_sql=page_sql, **fields)


def read_only_query(reader: Reader, sql: str, page: Page) -> dict[str, Any]:
    """Any one reading statement (`tracelake sql`'s rules). A SELECT is paged by the database; the
    other readers (DESCRIBE, SHOW, EXPLAIN, a listing PRAGMA) return few rows, paged here."""
    import duckdb  # noqa: PLC0415 - loaded by now: the warehouse connection is DuckDB's

    try:
        check_query(reader.con, sql)  # refuses a writing or outside-reaching statement before anything runs
        statements = reader.con.extract_statements(sql)
    except duckdb.Error as exc:
        raise TraceLakeError(f"query failed: {str(exc).strip().splitlines()[0]}") from None
    if len(statements) != 1:
        raise TraceLakeError(f"give one SQL statement per call, not {len(statements)}")
    statement = statements[0].query.strip().rstrip(";").strip()
    if statements[0].type.name == "SELECT":
        return paged_select(reader, statement, page)
    columns, rows = reader.rows(statement)
    return _paged(len(rows), page, columns, rows[page.offset:page.offset + page.size], sql=statement)


def public_tables(reader: Reader) -> tuple[str, list[str]]:
    """The SQL that lists the public tables and views, and their names."""
    sql = ("select table_name from duckdb_tables() where schema_name = 'main' union "
           "select view_name from duckdb_views() where schema_name = 'main' and not internal order by 1")
    _, rows = reader.rows(sql)
    return sql, [row[0] for row in rows]


def _summary(description: str) -> str:
    first = re.split(r"(?<=[.;])\s", description, maxsplit=1)[0]
    return first if len(first) <= MAX_SUMMARY_CHARS else first[:MAX_SUMMARY_CHARS - 3].rstrip() + "..."


def list_tables(reader: Reader, page: Page) -> dict[str, Any]:
    """The public tables, each with the first sentence of its documentation."""
    sql, names = public_tables(reader)
    docs = read_docs()
    rows = [(name, _summary(docs[name].description) if name in docs else "", len(docs[name].columns) if name in docs else 0)
            for name in names]
    shown = rows[page.offset:page.offset + page.size]
    return _paged(len(rows), page, ["table", "description", "documented_columns"], shown, sql=sql,
                  note="describe_table(table) gives a table's columns with their descriptions")


def describe_table(reader: Reader, table: str, page: Page) -> dict[str, Any]:
    """One public table's columns: name, type and the yml's description."""
    sql, names = public_tables(reader)
    if table not in names:
        close = [name for name in names if table.lower() in name.lower()][:10]
        raise TraceLakeError(f"no public table {table!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                                             "; list_tables lists them"))
    doc = read_docs().get(table)
    columns_sql = ("select column_name, data_type from information_schema.columns "
                   f"where table_schema = '{PUBLIC_SCHEMA}' and table_name = {sql_literal(table)} order by ordinal_position")
    _, typed = reader.rows(columns_sql)
    rows = [(name, kind, doc.columns.get(name, "") if doc else "") for name, kind in typed]
    shown = rows[page.offset:page.offset + page.size]
    return _paged(len(rows), page, ["column", "type", "description"], shown, sql=columns_sql, table=table,
                  description=doc.description if doc else "")


def list_traces(reader: Reader, page: Page) -> dict[str, Any]:
    answer = paged_select(reader, f"select {_TRACE_COLUMNS} from traces order by ingested_at, trace_id", page)
    if answer["total"] == 0:
        root = reader.wh.root
        raise TraceLakeError(f"warehouse {root} holds no traces yet; run `tracelake ingest TRACE --warehouse {root}`")
    return answer


def list_jobs(reader: Reader, page: Page) -> dict[str, Any]:
    _, names = public_tables(reader)
    if "jobs" not in names:
        root = reader.wh.root
        raise TraceLakeError(f"warehouse {root} has no jobs model yet; run `tracelake build --warehouse {root}`")
    return paged_select(reader, "select * from jobs order by job_id", page)


def one_trace(wh: Warehouse, selector: str) -> str:
    """The trace a selector names (a trace id or a prefix, a trace file already ingested, tags)."""
    from tracelake.selectors import resolve_one_trace  # noqa: PLC0415

    return resolve_one_trace(wh, selector, "this tool")


def _require_analyses(reader: Reader) -> None:
    _, names = public_tables(reader)
    if "findings" not in names:
        raise TraceLakeError(f"warehouse {reader.wh.root} holds no report yet; run `tracelake analyze TRACE "
                             f"--warehouse {reader.wh.root}` first")


def trace_findings(reader: Reader, trace: str, finding: str | None, page: Page) -> dict[str, Any]:
    """The findings of a trace's reports (its own first, then the comparisons it is trace 1 of), or one P<n>."""
    trace_id = one_trace(reader.wh, trace)
    _require_analyses(reader)
    where = f"trace_id = {sql_literal(trace_id)}"
    if finding is not None:
        match = re.fullmatch(r"[Pp]?(\d+)", finding.strip())
        if match is None:
            raise TraceLakeError(f"{finding!r} is not P<n> (e.g. P1)")
        where += f" and trace2_id is null and global_rank = {int(match.group(1))}"
    sql = f"select {_FINDING_COLUMNS} from findings where {where} order by trace2_id nulls first, global_rank"
    answer = paged_select(reader, sql, page, trace_id=trace_id)
    if answer["total"] == 0:
        raise TraceLakeError(f"trace {trace_id} has " + (f"no finding {finding} in its own report" if finding else "no report")
                             + "; run `tracelake analyze` on it, or list_findings without `finding` for its P numbers")
    answer["note"] = "evidence_sql returns the finding's claimed_ms and recoverable_ms; run it with the query tool"
    return answer


def _sections(text: str) -> list[tuple[str, int, int]]:
    """(heading, start, end) of each section: the text up to the first heading is the preamble."""
    starts = [m.start() for m in _HEADING.finditer(text)]
    bounds = ([0] if not starts or starts[0] > 0 else []) + starts + [len(text)]
    return [(text[a:b].split("\n", 1)[0].lstrip("#").strip() if text.startswith("#", a) else "(preamble)", a, b)
            for a, b in zip(bounds, bounds[1:])]


def report(reader: Reader, trace: str, compared_with: str | None, section: str | None, offset: int,
           max_chars: int) -> dict[str, Any]:
    """A chunk of a trace's analysis.md: a section (by number or heading) or the whole report, from `offset`."""
    if not 1 <= max_chars <= MAX_REPORT_CHARS:
        raise TraceLakeError(f"max_chars {max_chars} is not between 1 and {MAX_REPORT_CHARS}")
    if offset < 0:
        raise TraceLakeError(f"offset {offset} is negative")
    trace_id = one_trace(reader.wh, trace)
    _require_analyses(reader)
    scope = "trace2_id is null" if compared_with is None else f"trace2_id = {sql_literal(one_trace(reader.wh, compared_with))}"
    sql = (f"select analysis_md, trace2_id, analyzed_at from analyses where trace_id = {sql_literal(trace_id)} "
           f"and {scope} order by analyzed_at desc limit 1")
    _, rows = reader.rows(sql)
    if not rows:
        raise TraceLakeError(f"trace {trace_id} has no report" + (" against that trace" if compared_with else "")
                             + "; run `tracelake analyze` on it")
    path = rows[0][0]
    try:
        with open(path, encoding="utf-8") as file:
            text = _DATA_URI.sub(lambda m: f"data:(inline image, {len(m.group(0))} characters left out)", file.read())
    except OSError as exc:
        raise TraceLakeError(f"the report {path} cannot be read ({exc.strerror}); analyze the trace again") from None
    sections = _sections(text)
    chosen = _chosen_section(sections, section) if section is not None else ("(whole report)", 0, len(text))
    body = text[chosen[1]:chosen[2]]
    if offset > len(body):
        raise TraceLakeError(f"offset {offset} is past the end ({len(body)} characters)")
    chunk = body[offset:offset + max_chars]
    end = offset + len(chunk)
    return {"sql": sql, "trace_id": trace_id, "analysis_md": path, "section": chosen[0], "offset": offset,
            "total_chars": len(body), "next_offset": end if end < len(body) else None, "text": chunk,
            "sections": [{"number": i, "title": title, "chars": b - a} for i, (title, a, b) in enumerate(sections, 1)]}


def _chosen_section(sections: list[tuple[str, int, int]], section: str) -> tuple[str, int, int]:
    if section.strip().isdigit():
        number = int(section)
        if not 1 <= number <= len(sections):
            raise TraceLakeError(f"section {number} is not between 1 and {len(sections)}")
        return sections[number - 1]
    wanted = section.strip().lower()
    matches = [s for s in sections if s[0].lower() == wanted] or [s for s in sections if wanted in s[0].lower()]
    if not matches:
        raise TraceLakeError(f"no section {section!r}; the sections: " + "; ".join(s[0] for s in sections))
    return matches[0]
