"""Where the time of adding one trace to a lakehouse warehouse goes (bench/lake_scale.py runs it).

    .venv/bin/python bench/lake_add_profile.py WAREHOUSE TRACE [--explain MODEL ...]

Ingests TRACE into WAREHOUSE (a scratch copy: it is changed) through the Python API, with the lake's
write path timed step by step: opening the lake, each raw table's insert, the scoped views
(tracelake/lake_scope.py), each incremental model's insert, the commit: the steps of
lakehouse.update_marts for a new trace, repeated here with a clock on each. Prints one JSON
object: the phases, every statement's seconds, and, for each --explain MODEL, DuckDB's EXPLAIN
ANALYZE of that model's insert select (its operators and their rows: which reads every trace's).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.ingestion import ingest_paths
from tracelake.lake_scope import scope_to_traces
from tracelake.lakehouse import LakeWarehouse, _in_catalog
from tracelake.shipped_plan import ShippedPlans


class TimedLake(LakeWarehouse):
    """The lake's write path with a clock on each step."""

    def __init__(self, root: Path, explain: list[str]) -> None:
        super().__init__(root)
        self.timings: list[tuple[str, float]] = []
        self.explain = explain
        self.plans: dict[str, str] = {}

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
            yield con
            with self.clock("commit"):
                con.commit()
        finally:
            con.close()

    def _write_traces(self, con: duckdb.DuckDBPyConnection, plans: ShippedPlans, queued: list[StagedTrace]) -> str:
        for staged in queued:
            for table in TABLES:
                with self.clock(f"raw.{table}"):
                    self._insert_raw(con, table, staged)
        new = sorted(staged.trace_id for staged in queued)
        with self.clock("scope views"):  # as lakehouse.update_marts does
            scoped = scope_to_traces(con, plans, new, _in_catalog(con))
        named = _in_catalog(con)
        for model in plans.incremental.models:
            select = scoped(model.select_for(new))
            if model.name in self.explain:
                rows = con.execute(f"explain analyze select * from ({select})").fetchall()
                self.plans[model.name] = "\n".join(str(row[-1]) for row in rows)
            with self.clock(f"model {model.name}"):
                con.execute(f"insert into {named(model.relation)} by name select * from ({select})")
        return "fast"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("warehouse", type=Path)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--explain", action="append", default=[], help="a model whose insert to EXPLAIN ANALYZE")
    args = parser.parse_args(argv)
    lake = TimedLake(args.warehouse, args.explain)
    started = time.perf_counter()
    report = ingest_paths([args.trace], lake, {}, 1)
    total = time.perf_counter() - started
    if report.failed:
        raise SystemExit(f"ingest failed: {report.failed[0].message}")
    models = sum(s for label, s in lake.timings if label.startswith("model "))
    raw = sum(s for label, s in lake.timings if label.startswith("raw."))
    commit = sum(s for label, s in lake.timings if label == "commit")
    connects = sum(s for label, s in lake.timings if label.startswith("connect"))
    print(json.dumps({"total_s": total, "models_s": models, "raw_inserts_s": raw, "commit_s": commit,
                      "connects_s": connects, "connects": sum(1 for label, _ in lake.timings if label.startswith("connect")),
                      "rest_s": total - models - raw - commit - connects,
                      "statements": sorted(lake.timings, key=lambda t: -t[1]), "explain": lake.plans}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
