"""The trace comparison `tracelake compare` and `tracelake mcp`'s compare tool both run: two
selectors resolved to their traces, compared by analyzers/regression.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracelake.core.errors import WarehouseError

if TYPE_CHECKING:
    from tracelake.analyzers.regression import CompareSettings, RegressionVerdict
    from tracelake.warehouse import Warehouse


def compare_selectors(wh: Warehouse, baseline: str, candidate: str, config: CompareSettings, jobs: int,
                      ingest_new: bool = True) -> RegressionVerdict:
    """The verdict of `candidate` against `baseline` (each a trace selector; trace files not yet in
    the warehouse are ingested unless `ingest_new` is off)."""
    import duckdb  # noqa: PLC0415 - loaded late, like the CLI's commands

    from tracelake.analyzers.regression import compare as compare_traces  # noqa: PLC0415
    from tracelake.selectors import resolve_traces  # noqa: PLC0415

    try:
        baseline_ids = resolve_traces(wh, baseline, jobs, ingest_new=ingest_new)
        candidate_ids = resolve_traces(wh, candidate, jobs, ingest_new=ingest_new)
        with wh.connect_read_only() as con:
            verdict = compare_traces(con, baseline_ids, candidate_ids, config)
            verdict.warehouse_snapshot = wh.snapshot_of(con)
    except duckdb.CatalogException as exc:
        missing = str(exc).splitlines()[0]
        raise WarehouseError(f"warehouse {wh.root} lacks a table compare reads ({missing}); it was built by an "
                             f"older TraceLake: run `tracelake build --warehouse {wh.root}`") from None
    return verdict
