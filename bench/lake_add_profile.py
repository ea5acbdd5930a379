"""Where the time of adding traces to a lakehouse warehouse goes (bench/lake_scale.py runs it).

    .venv/bin/python bench/lake_add_profile.py WAREHOUSE TRACE... [--scoped]

Ingests the TRACEs into WAREHOUSE (a scratch copy: it is changed) through the Python API, running the
lake's own write path (tracelake/lakehouse.py) on a connection that clocks every statement: opening
the lake, the raw inserts, the model update (tracelake/lake_scope.py: the new traces modelled in
memory, or with --scoped the lake's tables read through the scoped views, as for a re-model), the
commit. Prints one JSON object: the phases and every statement's seconds, slowest first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.ingestion import ingest_paths
from tracelake.lakehouse import LakeWarehouse, update_marts
from tracelake.shipped_plan import ShippedPlans

_TARGET = re.compile(r'^\s*(create (?:or replace )?(?:temp )?(?:table|view)|insert into|attach|detach)'
                     r'\s+("[^"]+"(?:\."[^"]+")*|\S+)', re.IGNORECASE)


class TimedConnection:
    """A DuckDB connection whose execute() is clocked, labelled by what the statement makes."""

    def __init__(self, con: duckdb.DuckDBPyConnection, timings: list[tuple[str, float]]) -> None:
        self.con, self.timings = con, timings

    def execute(self, sql: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        found = _TARGET.match(sql)
        label = f"{found.group(1).lower()} {found.group(2)}" if found else " ".join(sql.split())[:60]
        started = time.perf_counter()
        try:
            return self.con.execute(sql, parameters) if parameters is not None else self.con.execute(sql)
        finally:
            self.timings.append((label, time.perf_counter() - started))

    def cursor(self) -> TimedConnection:
        return TimedConnection(self.con.cursor(), self.timings)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


class TimedLake(LakeWarehouse):
    """The lake's write path with a clock on each step."""

    def __init__(self, root: Path, scoped: bool) -> None:
        super().__init__(root)
        self.timings: list[tuple[str, float]] = []
        self.scoped = scoped

    @contextmanager
    def clock(self, label: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings.append((label, time.perf_counter() - started))

    def connect_lake(self, read_only: bool, snapshot: int | None = None, layout: Any = None) -> duckdb.DuckDBPyConnection:
        with self.clock(f"connect ({'read' if read_only else 'write'})"):
            return super().connect_lake(read_only, snapshot, layout)

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = self.connect_lake(read_only=False)
        try:
            con.begin()
            yield TimedConnection(con, self.timings)  # type: ignore[misc]
            with self.clock("commit"):
                con.commit()
        finally:
            con.close()

    def _write_traces(self, con: duckdb.DuckDBPyConnection, plans: ShippedPlans, queued: list[StagedTrace]) -> str:
        if not self.scoped:
            with self.clock("whole write"):
                return super()._write_traces(con, plans, queued)
        with self.clock("whole write"):
            for table in TABLES:
                self._insert_raw(con, table, queued)
            update_marts(con, plans, sorted(s.trace_id for s in queued))  # no `staged`: the scoped path
        return "fast"


def summary(lake: TimedLake, total: float) -> dict[str, Any]:
    def share(prefix: str) -> float:
        return sum(s for label, s in lake.timings if label.startswith(prefix))

    statements = [t for t in lake.timings if t[0] not in ("whole write",)]
    return {"total_s": total, "write_s": share("whole write"), "commit_s": share("commit"),
            "connects_s": share("connect ("), "connects": sum(1 for label, _ in lake.timings if label.startswith("connect (")),
            "raw_inserts_s": share('insert into raw.'),
            "models_s": share("whole write") - share('insert into raw.'),
            "statements": sorted(statements, key=lambda t: -t[1])[:40]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("traces", type=Path, nargs="+")
    parser.add_argument("--scoped", action="store_true", help="model through the scoped views of the lake")
    args = parser.parse_args(argv)
    lake = TimedLake(args.warehouse, args.scoped)
    started = time.perf_counter()
    report = ingest_paths(list(args.traces), lake, {}, 1)
    total = time.perf_counter() - started
    if report.failed:
        raise SystemExit(f"ingest failed: {report.failed[0].message}")
    print(json.dumps(summary(lake, total)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
