"""The analysis working copy this process keeps: the last one it made (tracelake/lake_reader.py
makes them). A later analysis of traces a copy holds reads it again while nothing but recorded
analyses was committed since (the ranks of a job, one after another), unless it reads findings
(the job's report reads its ranks'). What a local catalog committed is read from its SQLite file
(tracelake/local_catalog.py); a PostgreSQL catalog's copy is made again for each analysis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracelake.analysis_tables import ANALYSIS_TABLES
from tracelake.lake_reader import only_ledger_changes
from tracelake.local_catalog import changes_since
from tracelake.shipped_plan import ShippedPlans


@dataclass(frozen=True)
class WorkingCopy:
    snapshot: int
    scope: frozenset[str]
    connection: duckdb.DuckDBPyConnection


_KEPT: dict[str, WorkingCopy] = {}  # warehouse folder -> the copy this process made last (one entry)


def kept_copy(root: Path, catalog: Path | None, trace_ids: Sequence[str],
              reads_findings: bool) -> duckdb.DuckDBPyConnection | None:
    """A cursor of the copy kept for `root` when it still serves an analysis of `trace_ids`."""
    kept = _KEPT.get(root.resolve().as_posix())
    if kept is None or not set(trace_ids) <= kept.scope:
        return None
    changes = changes_since(catalog, kept.snapshot)
    if changes is None or (changes[0] and (reads_findings or not only_ledger_changes(*changes, ANALYSIS_TABLES))):
        return None
    return kept.connection.cursor()


def keep_copy(root: Path, snapshot: int, scope: Sequence[str], connection: duckdb.DuckDBPyConnection
              ) -> duckdb.DuckDBPyConnection:
    """Keep `connection` as the process' copy, of `root` (the one before it, of any folder, is
    dropped: one analysis, or one job, at a time); a cursor of it."""
    _KEPT.clear()
    _KEPT[root.resolve().as_posix()] = WorkingCopy(snapshot, frozenset(scope), connection)
    return connection.cursor()


def read_other_traces(plans: ShippedPlans) -> set[tuple[str, str]]:
    """(schema, name) of every model whose rows of a trace read other traces (BuildNode)."""
    return {(schema.strip('"'), name.strip('"')) for node in plans.build.nodes if node.reads_other_traces
            for _, schema, name in [node.relation.split(".")]}


__all__ = ["keep_copy", "kept_copy", "read_other_traces"]
