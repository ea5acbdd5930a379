"""The warehouse folder: Parquet partitions, the DuckDB file, the lock, and model updates.

Layout:
    parquet/<table>/trace_id=<id>/part-0.parquet   Hive partitions written by ingest
    staging/<id>-<nonce>/<table>/                   a trace being written; renamed into place
    warehouse.duckdb                                raw.* views over the Parquet + dbt models
    dbt/                                            dbt target and logs; plan.json (fast path)

A trace is committed when its `trace_files` partition appears; that rename comes last, so a
crash leaves either nothing or orphan partitions that the next writer removes.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ingest.errors import WarehouseError
from ingest.staged import TABLES, StagedTrace
from tracelake.dbt_runner import (
    IncrementalPlan,
    compile_incremental_plan,
    execute_plan,
    project_fingerprint,
    run_dbt,
)

COMMIT_TABLE = "trace_files"
PARTITION_PREFIX = "trace_id="
# Other traces in the warehouse from which an update scopes the raw views to the new traces:
# re-pointing them costs ~0.05 s, scanning another small trace's events ~7 ms (bench/bulk.py
# warehouse, 100 traces: 0.92 s unscoped, 0.21 s scoped per 65 kB trace).
SCOPED_UPDATE_MIN_OTHER_TRACES = 8
# A model update writes ~20 MB into DuckDB (55 MB trace). Above this WAL size DuckDB checkpoints at
# the commit and skips writing the WAL first; with its default (16 MB) it wrote the WAL, then
# checkpointed on close: commit + close 0.12 -> 0.09 s.
UPDATE_CHECKPOINT_THRESHOLD = "1MB"
READ_RETRY_SECONDS = 10.0
STALE_STAGING_SECONDS = 24 * 3600


class Warehouse:
    def __init__(self, root: Path) -> None:
        # absolute: dbt runs from the project folder, where a relative warehouse path means another place
        root = root.expanduser().absolute()
        self.root = root
        self.parquet_dir = root / "parquet"
        self.staging_dir = root / "staging"
        self.db_path = root / "warehouse.duckdb"
        self.dbt_dir = root / "dbt"
        self.plan_path = self.dbt_dir / "plan.json"
        self.lock_path = root / ".lock"

    # ---- access -------------------------------------------------------------------------
    def prepare_for_writing(self) -> None:
        """Create the folder if needed and prove it is writable, before any work starts."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-probe-{uuid.uuid4().hex}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise WarehouseError(
                f"warehouse {self.root} is not writable ({exc.strerror}); "
                "pick another folder with --warehouse or fix its permissions"
            ) from None

    def require_existing(self) -> None:
        if not self.db_path.exists():
            raise WarehouseError(
                f"no warehouse at {self.root}; run `tracelake ingest TRACE --warehouse {self.root}` first"
            )

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        with self.lock_path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def connect_read_only(self) -> duckdb.DuckDBPyConnection:
        self.require_existing()
        deadline = time.monotonic() + READ_RETRY_SECONDS
        while True:
            try:
                return duckdb.connect(str(self.db_path), read_only=True)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise WarehouseError(f"cannot open {self.db_path}: {exc}") from None
                time.sleep(0.1)

    # ---- traces ---------------------------------------------------------------------------
    def trace_ids(self) -> set[str]:
        folder = self.parquet_dir / COMMIT_TABLE
        if not folder.is_dir():
            return set()
        return {p.name[len(PARTITION_PREFIX):] for p in folder.iterdir() if p.name.startswith(PARTITION_PREFIX)}

    def new_staging_dir(self, trace_id: str) -> Path:
        folder = self.staging_dir / f"{trace_id}-{uuid.uuid4().hex[:8]}"
        folder.mkdir(parents=True)
        return folder

    def _partition(self, table: str, trace_id: str) -> Path:
        return self.parquet_dir / table / f"{PARTITION_PREFIX}{trace_id}"

    def commit(self, staged: StagedTrace) -> bool:
        """Move a staged trace into place (caller holds the write lock). False if already there."""
        staging = Path(staged.staging_dir)
        if staged.trace_id in self.trace_ids():
            shutil.rmtree(staging, ignore_errors=True)
            return False
        for table in [t for t in TABLES if t != COMMIT_TABLE] + [COMMIT_TABLE]:
            target = self._partition(table, staged.trace_id)
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / table, target)
        shutil.rmtree(staging, ignore_errors=True)
        return True

    def retag(self, trace_id: str, tags: dict[str, str]) -> bool:
        """Merge `tags` into a committed trace's tags, new values winning (caller holds the write
        lock). Tags live only in the trace's `trace_files` row, which every view reads, so the
        one-row file is rewritten beside itself and renamed over. True when a tag changed."""
        import pyarrow as pa  # noqa: PLC0415 - here only: `tracelake sql` starts without pyarrow
        import pyarrow.parquet as pq  # noqa: PLC0415

        from ingest.parquet_io import write_file  # noqa: PLC0415 - the settings every trace table has

        partition = self._partition(COMMIT_TABLE, trace_id)
        files = sorted(partition.glob("*.parquet"))
        table = pq.read_table(files[0])
        current = dict(table.column("tags")[0].as_py() or [])
        merged = {**current, **tags}
        if merged == current:
            return False
        index = table.schema.get_field_index("tags")
        column = pa.array([list(merged.items())], type=table.schema.field("tags").type)
        temporary = partition / f".{files[0].name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            write_file(table.set_column(index, table.schema.field("tags"), column), temporary)
            os.replace(temporary, files[0])
        finally:
            temporary.unlink(missing_ok=True)
        return True

    def remove_orphans(self) -> None:
        """Drop partitions of traces that never committed, and old abandoned staging folders."""
        committed = self.trace_ids()
        for table in TABLES:
            folder = self.parquet_dir / table
            if not folder.is_dir():
                continue
            for partition in folder.iterdir():
                if partition.name[len(PARTITION_PREFIX):] not in committed:
                    shutil.rmtree(partition, ignore_errors=True)
        if self.staging_dir.is_dir():
            for leftover in self.staging_dir.iterdir():
                if time.time() - leftover.stat().st_mtime > STALE_STAGING_SECONDS:
                    shutil.rmtree(leftover, ignore_errors=True)

    # ---- models ---------------------------------------------------------------------------
    def _refresh_raw_views(self, con: duckdb.DuckDBPyConnection, only: list[str] | None = None) -> None:
        """raw.<table> views over the Parquet partitions (re-pointed if the folder moved); with
        `only`, over those traces' partitions alone."""
        existing = dict(
            con.execute("select view_name, sql from duckdb_views() where schema_name = 'raw'").fetchall()
        )
        con.execute("create schema if not exists raw")
        for table in TABLES:
            partitions = ["*"] if only is None else [f"{PARTITION_PREFIX}{trace_id}" for trace_id in only]
            globs = [(self.parquet_dir / table / p / "*.parquet").as_posix().replace("'", "''") for p in partitions]
            files = ", ".join(f"'{glob}'" for glob in globs)
            if only is None and files in existing.get(table, ""):
                continue
            con.execute(
                f"create or replace view raw.{table} as select * from read_parquet([{files}], "
                "hive_partitioning = true, union_by_name = true, hive_types = {'trace_id': varchar})"
            )

    def _load_plan(self) -> IncrementalPlan | None:
        if not self.plan_path.exists():
            return None
        try:
            plan = IncrementalPlan.from_json(self.plan_path.read_text())
        except (ValueError, KeyError, TypeError):
            return None  # unreadable plan: rebuild it
        return plan if plan.fingerprint == project_fingerprint() else None

    def build(self, *, run_tests: bool, full_refresh: bool = False) -> None:
        """Run the dbt project over every trace (caller holds the write lock), then re-plan."""
        if not self.trace_ids():
            raise WarehouseError(f"warehouse {self.root} has no traces yet; ingest one first")
        with duckdb.connect(str(self.db_path)) as con:
            self._refresh_raw_views(con)
        args = ["build"] if run_tests else ["build", "--exclude-resource-type", "test"]
        if full_refresh:
            args.append("--full-refresh")
        self.plan_path.unlink(missing_ok=True)
        run_dbt(self.db_path, self.dbt_dir, args)
        plan = compile_incremental_plan(self.db_path, self.dbt_dir)
        tmp = self.plan_path.with_suffix(".tmp")
        tmp.write_text(plan.to_json())
        os.replace(tmp, self.plan_path)

    def prepare_update(self, warm_up: bool = False) -> PreparedUpdate:
        """The warehouse opened for a model update (caller holds the write lock): the plan read,
        the database open and the raw views current. With `warm_up`, DuckDB's Parquet reader is
        set up too, which only pays when this runs beside other work (ingest: while its workers
        decode a trace); else the first model sets it up."""
        plan = self._load_plan()
        if plan is None:  # a dbt run follows, which opens the database itself
            return PreparedUpdate(None, None)
        con = duckdb.connect(str(self.db_path))
        try:
            con.execute(f"set checkpoint_threshold = '{UPDATE_CHECKPOINT_THRESHOLD}'")
            self._refresh_raw_views(con)
            if warm_up:
                con.execute("select count(*) from raw.trace_files").fetchall()  # first Parquet read: ~0.05 s
        except BaseException:
            con.close()
            raise
        return PreparedUpdate(plan, con)

    def update_models(self, new_trace_ids: list[str], prepared: PreparedUpdate | None = None) -> str:
        """Bring the marts up to date for new traces (caller holds the write lock); closes
        `prepared` (made here when not given).

        Returns how: "fast" (compiled plan executed) or "dbt" (full dbt run, once per batch).
        """
        prepared = prepared or self.prepare_update()
        with prepared:
            con, plan = prepared.connection, prepared.plan
            if con is None or plan is None:
                self.build(run_tests=False, full_refresh=self.db_path.exists())
                return "dbt"
            # Every incremental model reads only the new traces' rows, so in a larger warehouse the
            # raw views see only their partitions during the update: the cost stays that of the new
            # traces, not of the warehouse (DuckDB does not push the trace filter through every view
            # and CTE). Re-pointing the views costs about what scanning a few other traces does.
            others = len(self.trace_ids()) - len(new_trace_ids)
            scoped = others >= SCOPED_UPDATE_MIN_OTHER_TRACES
            execute_plan(con, plan, sorted(new_trace_ids),
                         scope_sources=(lambda only: self._refresh_raw_views(con, only)) if scoped else (lambda _: None))
        return "fast"


@dataclass
class PreparedUpdate:
    """An open warehouse ready for a model update, or (no plan yet) the sign that dbt must run."""

    plan: IncrementalPlan | None
    connection: duckdb.DuckDBPyConnection | None

    def __enter__(self) -> PreparedUpdate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
