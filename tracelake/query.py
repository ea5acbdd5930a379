"""Read-only SQL over the warehouse for `tracelake sql` and `traces`, stopped at a time limit.

A statement that runs longer than its timeout is interrupted (DuckDB's `interrupt()`, from a timer
thread) and reported in one line, so a cross join typed by mistake does not hold a core for hours.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tracelake.core.errors import TraceLakeError
from tracelake.sql_guard import check_query, readable_folder, refused_access

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse

# `tracelake sql` stops a statement after this long (`--timeout`, or TRACELAKE_SQL_TIMEOUT_SECONDS;
# 0 = no limit): the slowest public-table query over the 8-rank test job takes ~2 s here, so ten
# minutes is a query gone wrong (a cross join), not a large warehouse.
SQL_TIMEOUT_SECONDS = 600.0
SQL_TIMEOUT_ENV = "TRACELAKE_SQL_TIMEOUT_SECONDS"


class QueryTimeout(TraceLakeError):
    """A statement ran past its timeout and was stopped."""


def default_timeout() -> float:
    text = os.environ.get(SQL_TIMEOUT_ENV)
    if text is None:
        return SQL_TIMEOUT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise TraceLakeError(f"{SQL_TIMEOUT_ENV}={text!r} is not a number of seconds >= 0 (0 = no limit)")
    return seconds


def run_query(wh: Warehouse, query: str, timeout_s: float, snapshot: int | None = None) -> tuple[list[str], list[tuple]]:
    """Run read-only SQL (statements that would change or reach beyond the warehouse are refused
    before anything runs: tracelake/sql_guard.py), stopping it after `timeout_s` (0 = never); on
    a lakehouse warehouse, over `snapshot` when given."""
    # locked down (tracelake/sql_guard.py)
    with wh.connect_read_only(snapshot=snapshot) as con:
        return run_on(con, wh.root, query, timeout_s)


def run_on(con: duckdb.DuckDBPyConnection, warehouse_root: Path, query: str, timeout_s: float) -> tuple[list[str], list[tuple]]:
    """`run_query` on a read-only connection the caller holds (Warehouse.connect_read_only), so that
    several queries share one: the same guard, time limit and errors."""
    expired = threading.Event()

    def stop() -> None:
        expired.set()  # before the interrupt: the query's error may reach the except below at once
        con.interrupt()

    timer = threading.Timer(timeout_s, stop) if timeout_s > 0 else None
    try:
        check_query(con, query)
        if timer is not None:
            timer.daemon = True
            timer.start()
        result = con.execute(query)
        columns = [d[0] for d in result.description] if result.description else []
        return columns, result.fetchall() if columns else []
    except duckdb.InterruptException:
        if expired.is_set():
            raise QueryTimeout(f"query stopped after {timeout_s:g} s (--timeout); narrow it, or raise "
                               "--timeout (0 = no limit)") from None
        raise
    except duckdb.PermissionException as exc:  # a file or URL outside the warehouse
        raise refused_access(str(exc), warehouse_root, readable_folder(con)) from None
    except duckdb.Error as exc:
        first_line = str(exc).strip().splitlines()[0]
        raise TraceLakeError(f"query failed: {first_line}") from None
    finally:
        if timer is not None:
            timer.cancel()
