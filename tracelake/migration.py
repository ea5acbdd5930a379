"""`tracelake migrate`: a warehouse of the classic layout copied into a new lakehouse warehouse.

The classic warehouse's raw Parquet (every committed trace, with its tags as they are now) becomes
the new lakehouse's raw tables, and its marts are built from them by the compiled plan, all in the
new warehouse's first commit: the new folder holds every trace or, if the run dies, none (the next
`migrate` into it starts again). The classic warehouse is only read. Reports (`analyses`,
`findings`) are not carried over: `tracelake analyze` writes them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelake.core.errors import WarehouseError
from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.lakehouse import LakeWarehouse
from tracelake.warehouse import Warehouse


@dataclass(frozen=True)
class MigrationReport:
    traces: int


def migrate(source: Warehouse, target: LakeWarehouse) -> MigrationReport:
    """Every committed trace of `source` (classic) committed into the new lakehouse `target`, its
    marts built, in one transaction (takes `target`'s write lock)."""
    if isinstance(source, LakeWarehouse):
        raise WarehouseError(f"{source.root} is a lakehouse warehouse already")
    source.require_existing()
    if target.exists() and target.trace_ids():
        raise WarehouseError(f"{target.root} is a warehouse with traces; migrate into a new folder")
    with source.connect_read_only() as con:
        trace_ids = sorted(str(r[0]) for r in con.execute("select trace_id from traces").fetchall())
    if not trace_ids:
        raise WarehouseError(f"warehouse {source.root} holds no traces to migrate")
    target.prepare_for_writing()
    with target.write_lock():
        prepared = target.prepare_update()
        try:
            for trace_id in trace_ids:
                target.commit(_staged_from(source, target, trace_id))
            target.update_models(trace_ids, prepared)
        finally:
            target.release_staging_dirs()
    return MigrationReport(len(trace_ids))


def _staged_from(source: Warehouse, target: LakeWarehouse, trace_id: str) -> StagedTrace:
    """A staging folder of `target` whose tables link to the trace's Parquet in `source`."""
    folder = target.new_staging_dir(trace_id)
    for table in TABLES:
        partition = source.parquet_dir / table / f"trace_id={trace_id}"
        files = sorted(partition.glob("*.parquet")) if partition.is_dir() else []
        if not files and table == "trace_files":
            raise WarehouseError(f"{partition} is missing: trace {trace_id} of {source.root} is not whole")
        (folder / table).mkdir(parents=True, exist_ok=True)
        for n, file in enumerate(files):
            (folder / table / f"part-{n}.parquet").symlink_to(file.resolve())
    return StagedTrace(trace_id=trace_id, path=str(partition), staging_dir=str(folder), event_count=0,
                       dropped_event_count=0, uncompressed_bytes=0, seconds=0.0)
