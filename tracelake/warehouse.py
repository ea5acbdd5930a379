"""A warehouse folder of the classic layout (README, "The classic layout"): Parquet partitions, the
DuckDB file, the lock, model updates. It is also the base of the lakehouse (tracelake/lakehouse.py),
which keeps its locks, staging and output rules and replaces the storage.

Readers never block writers: a writer (one at a time, on the lock) changes a private copy of
warehouse.duckdb and renames it over the original when done, so a reader (a notebook's open
connection too) keeps the snapshot it opened and the next reader sees the new one.

A trace's Parquet is committed when its `trace_files` partition appears (that rename comes last);
its models are updated when the `trace_model_updates` mart lists it, which the same transaction as
every other mart's rows writes. Every command checks both on open: a trace committed but not
modelled (a writer was killed) has its models finished, partitions of traces that never committed
and the staging folders of dead runs are removed.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tracelake.analysis_tables import finish_dead_records
from tracelake.config import default_jobs
from tracelake.core.errors import WarehouseError
from tracelake.crashpoints import crash_point
from tracelake.dbt_runner import NodeProgress, compile_incremental_plan, parse_project, project_fingerprint, run_dbt
from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.raw_views import file_list, refresh_raw_views
from tracelake.removal import RemovalJournal, finish_removals, read_journal, register_reader, release_with, write_journal
from tracelake.shipped_plan import IncrementalPlan, ShippedPlans, execute_build_plan, execute_plan, load_shipped_plans
from tracelake.snapshot import PreparedUpdate, Snapshot
from tracelake.sql_guard import lock_down
from tracelake.staging import StagingFolder, has_dead_staging, remove_dead_staging, replace_file, stop_signals_held
from tracelake.tag_journal import (
    TagJournal,
    finish_journals,
    forget_tag_modelled,
    read_tags,
    roll_forward_dead,
    traces_to_remodel,
)
from tracelake.writer_lock import LOCK_POLL_SECONDS, hold_writer_lock

COMMIT_TABLE = "trace_files"
PARTITION_PREFIX = "trace_id="
# Other traces in the warehouse from which an update scopes the raw views to the new traces.
# Re-pointing them costs 5-7 ms; with even two small traces beside it, the update of the 8.6 MB
# Qwen trace took 0.83 s scoped against 1.05-1.36 s unscoped (every statement binds the views over
# every partition's files); 100 traces (bench/bulk.py): 0.92 s unscoped, 0.21 s scoped per 65 kB trace.
SCOPED_UPDATE_MIN_OTHER_TRACES = 1
# A model update writes ~20 MB into DuckDB (55 MB trace). Above this WAL size DuckDB checkpoints at
# the commit and skips writing the WAL first; with its default (16 MB) it wrote the WAL, then
# checkpointed on close: commit + close 0.12 -> 0.09 s.
UPDATE_CHECKPOINT_THRESHOLD = "1MB"
# A reader retries this long when the database is locked by a process that writes it in place
# (a TraceLake older than the private-copy writers, or a user's own read-write connection).
READ_RETRY_SECONDS = 10.0
# Model statements run at once in a model update or a new warehouse's build (tracelake/plan_executor.py):
# one per core. BERT-small's first build: 1.15-1.47 s on one cursor, 0.68-0.91 s on two cursors (2 cores).
MODEL_UPDATE_WORKERS = default_jobs()
DATABASE_FILE = "warehouse.duckdb"  # the classic layout's database; its presence makes a folder one
LEDGER_TABLE = "trace_model_updates"  # the mart listing every trace whose models are up to date


def _ledger(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The traces whose models are up to date, as the database `con` reads lists them."""
    return {row[0] for row in con.execute(f"select trace_id from {LEDGER_TABLE}").fetchall()}


class Warehouse:
    def __init__(self, root: Path) -> None:
        # absolute: dbt runs from the project folder, where a relative warehouse path means another place;
        # resolved: the raw views name this folder, and two spellings of it must not look like a move
        root = root.expanduser().resolve()
        if "?" in str(root):
            raise WarehouseError(f"warehouse {root}: DuckDB reads a '?' in a database path as the start of "
                                 "connection options; choose a folder whose path has no '?'")
        if "\\" in str(root):
            raise WarehouseError(f"warehouse {root}: DuckDB reads a backslash in a database path as a folder "
                                 "separator (as on Windows) and opens another file; choose a folder whose path has no '\\'")
        self.root = root
        self.parquet_dir = root / "parquet"
        self.staging_dir = root / "staging"
        self.pending_dir = root / "pending"  # decided changes a model update still has to finish
        self.db_path = root / DATABASE_FILE
        self.dbt_dir = root / "dbt"
        self.plan_path = self.dbt_dir / "plan.json"
        self.lock_path = root / ".lock"
        self._staging: dict[Path, StagingFolder] = {}
        self._tag_journals: list[TagJournal] = []
        self.stop_waiting = threading.Event()  # set to make a thread waiting for the lock give up

    # ---- access -------------------------------------------------------------------------
    runs_data_tests = True  # `build` runs dbt's data tests too

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
        for folder in self._own_folders():
            if not os.access(folder, os.W_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
                raise WarehouseError(
                    f"warehouse folder {folder} is not writable by you (it belongs to user {folder.stat().st_uid}, "
                    "who made it); writing this warehouse needs write access to all its folders: run as that "
                    "user, or make them writable for you (a shared group and chmod -R g+w)")

    def _own_folders(self) -> Iterator[Path]:
        """The folders writers change: every folder under the warehouse (tables, partitions, dbt's,
        the staging and journal folders), except the private staging folders of running writers."""
        for folder, subfolders, _ in os.walk(self.root):
            subfolders[:] = [name for name in subfolders if not name.startswith(".")]
            yield Path(folder)

    def require_existing(self) -> None:
        if not self.db_path.exists():
            raise WarehouseError(
                f"no warehouse at {self.root}; run `tracelake ingest TRACE --warehouse {self.root}` first"
            )

    @contextmanager
    def write_lock(self, wait: bool = True) -> Iterator[bool]:
        """Hold the writers' lock (tracelake/writer_lock.py): re-entrant in this process; False at once
        when `wait` is off and another writer holds it."""
        with hold_writer_lock(self.root, self.lock_path, self.stop_waiting, wait) as held:
            yield held

    def connect_analysis(self, trace_ids: Sequence[str], repair: bool = True,
                         reads_findings: bool = False) -> duckdb.DuckDBPyConnection:
        """The read-only connection an analysis of `trace_ids` reads through: the warehouse itself
        here; a lakehouse gives a working copy of those traces' rows (tracelake/lake_reader.py), one
        made after the last recorded analysis when the reader `reads_findings`."""
        return self.connect_read_only(repair=repair)

    def connect_read_only(self, repair: bool = True, snapshot: int | None = None) -> duckdb.DuckDBPyConnection:
        """A read-only connection to the current snapshot. With `repair`, what a killed writer left
        (see `needs_repair`) is finished first, unless a writer is at work. Only a lakehouse keeps
        older snapshots to read (`snapshot`)."""
        if snapshot is not None:
            self.require_existing()
            raise WarehouseError(f"--at reads a snapshot of a lakehouse warehouse; {self.root} is the classic layout, "
                                 "which keeps only its current state")
        if repair and ((not self.db_path.exists() and self.trace_ids()) or read_journal(self.root)):
            self.repair_if_idle()  # a first build that died, or traces removed: before this reader registers
        con = self._open_read_only()
        if repair and self.needs_repair(con):
            con.close()
            del con  # and with it its reader registration: the repair may remove files no reader needs
            self.repair_if_idle()
            con = self._open_read_only()
        return con

    def snapshot_of(self, con: duckdb.DuckDBPyConnection) -> int | None:
        """The snapshot `con` reads: None, the classic layout keeps only its current state."""
        return None

    def _open_read_only(self) -> duckdb.DuckDBPyConnection:
        """A locked-down read-only connection, registered as a reader (tracelake/removal.py) before
        it opens the database and for as long as it lives: no Parquet file its snapshot names is
        deleted meanwhile."""
        self.require_existing()
        registration = register_reader(self.root)
        deadline = time.monotonic() + READ_RETRY_SECONDS
        while True:
            try:
                con = duckdb.connect(str(self.db_path), read_only=True)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    if registration is not None:
                        os.close(registration)
                    raise WarehouseError(f"cannot open {self.db_path}: {exc}") from None
                time.sleep(LOCK_POLL_SECONDS)
                continue
            release = release_with(con, registration)
            try:
                lock_down(con, self.root)  # nothing run on it writes, loads or reaches the network
            except BaseException:
                con.close()
                release()
                raise
            return con

    # ---- traces ---------------------------------------------------------------------------
    def trace_ids(self) -> set[str]:
        """The committed traces: a `trace_files` partition, and not being removed (the journal of
        `tracelake rm` lists it until its Parquet is gone: tracelake/removal.py)."""
        return self._partition_ids() - read_journal(self.root).trace_ids

    def _partition_ids(self) -> set[str]:
        folder = self.parquet_dir / COMMIT_TABLE
        if not folder.is_dir():
            return set()
        return {p.name[len(PARTITION_PREFIX):] for p in folder.iterdir() if p.name.startswith(PARTITION_PREFIX)}

    def _inspect(self, con: duckdb.DuckDBPyConnection | None = None) -> tuple[set[str] | None, bool]:
        """(the traces whose models are up to date, whether the raw views read this folder's
        Parquet), read through `con` or a connection of its own. None for the first: no database
        yet, or one built before the ledger existed."""
        if con is None:
            if not self.db_path.exists():
                return None, False
            try:
                with duckdb.connect(str(self.db_path), read_only=True) as own:
                    return self._inspect(own)
            except duckdb.IOException:
                return None, True  # written in place by an older TraceLake: its own lock says who
        views = dict(con.execute("select view_name, sql from duckdb_views() where schema_name = 'raw'").fetchall())
        here = all(f"list_value({self._raw_view_files(table)})" in views.get(table, "") for table in TABLES)
        try:
            return _ledger(con), here
        except duckdb.CatalogException:
            return None, here

    def modelled_trace_ids(self) -> set[str]:
        """Traces the published warehouse lists in its ledger (empty when it has none)."""
        return self._inspect()[0] or set()

    def _unfinished(self, con: duckdb.DuckDBPyConnection | None = None,
                    committed: set[str] | None = None) -> tuple[set[str], bool]:
        """(traces committed but not modelled, whether the raw views must be re-pointed here)."""
        committed = self.trace_ids() if committed is None else committed
        if not committed:
            return set(), False
        if not self.db_path.exists():
            return committed, False
        modelled, here = self._inspect(con)
        return (set() if modelled is None else committed - modelled), not here

    def needs_repair(self, con: duckdb.DuckDBPyConnection | None = None) -> bool:
        """Whether a dead run left anything: a trace to finish, partitions of a trace that never
        committed, a staging folder, or raw views that read another folder (a moved warehouse).
        Reads the database through `con` when given."""
        committed = self.trace_ids()
        if (has_dead_staging(self.staging_dir) or has_dead_staging(self.root) or has_dead_staging(self.pending_dir)
                or self._orphan_partitions(committed) or read_journal(self.root).unpublished):
            return True
        pending, moved = self._unfinished(con, committed)
        return bool(pending) or moved

    def _orphan_partitions(self, committed: set[str] | None = None) -> list[Path]:
        """Partitions of traces that never committed (those `rm` is removing are not: their files
        go when no reader needs them)."""
        committed = (self.trace_ids() if committed is None else committed) | read_journal(self.root).trace_ids
        orphans = []
        for table in TABLES:
            folder = self.parquet_dir / table
            if folder.is_dir():
                orphans += [p for p in folder.iterdir() if p.name[len(PARTITION_PREFIX):] not in committed]
        return orphans

    def repair(self) -> list[str]:
        """Finish what dead writers left (caller holds the write lock): their staging folders and
        uncommitted partitions go, committed traces get their models, and the raw views of a
        warehouse folder that was moved or copied read its own Parquet, and a removal a killed `rm`
        began is finished. Returns the traces finished."""
        self.finish_removals()
        if has_dead_staging(self.pending_dir):  # a killed analyze's report rows, a killed run's output staging
            finish_dead_records(self.pending_dir, self.writing)
        self.remove_orphans()
        pending, moved = self._unfinished()
        if pending:
            print(f"tracelake: finishing the model update of {len(pending)} trace(s) an interrupted run left "
                  f"in {self.root}", file=sys.stderr, flush=True)
        if pending or has_dead_staging(self.pending_dir):  # a model update also finishes decided tag changes
            self.update_models(sorted(pending))
        elif moved:
            with self.writing() as con:
                self._refresh_raw_views(con)
        remove_dead_staging(self.pending_dir)
        return sorted(pending)

    def repair_if_idle(self) -> list[str] | None:
        """`repair` unless another writer is at work (that writer finishes it): the traces finished,
        or None when it did not run."""
        if not os.access(self.root, os.W_OK):
            return None  # a warehouse the user can only read: nothing this process could finish
        with self.write_lock(wait=False) as held:
            return self.repair() if held else None

    def new_staging_dir(self, trace_id: str) -> Path:
        with stop_signals_held():  # a stop right after the folder is made still finds it recorded
            folder = StagingFolder(self.staging_dir, trace_id, clean=False)  # the writer cleans under its lock
            self._staging[folder.path] = folder
        return folder.path

    def release_staging_dirs(self) -> None:
        for folder in list(self._staging):
            self.release_staging_dir(folder)

    def release_staging_dir(self, folder: Path) -> None:
        staging = self._staging.pop(folder, None)
        if staging is not None:
            staging.close()
        else:
            shutil.rmtree(folder, ignore_errors=True)

    def _partition(self, table: str, trace_id: str) -> Path:
        return self.parquet_dir / table / f"{PARTITION_PREFIX}{trace_id}"

    def commit(self, staged: StagedTrace) -> bool:
        """Move a staged trace into place (caller holds the write lock). False if already there."""
        staging = Path(staged.staging_dir)
        if staged.trace_id in self.trace_ids():
            self.release_staging_dir(staging)
            return False
        journal = read_journal(self.root)
        if staged.trace_id in journal.trace_ids:  # ingested again while its removal waits for readers
            write_journal(self.root, RemovalJournal([t for t in journal.unpublished if t != staged.trace_id],
                                                    [t for t in journal.published if t != staged.trace_id],
                                                    journal.compact))
        for table in [t for t in TABLES if t != COMMIT_TABLE] + [COMMIT_TABLE]:
            target = self._partition(table, staged.trace_id)
            if target.exists():  # file by file: a reader of an older snapshot may be reading these
                for stale in set(os.listdir(target)) - set(os.listdir(staging / table)):
                    (target / stale).unlink(missing_ok=True)
                for name in os.listdir(staging / table):
                    os.replace(staging / table / name, target / name)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staging / table, target)
            crash_point(f"committed-{table}")
        self.release_staging_dir(staging)
        return True

    def retag(self, trace_id: str, tags: dict[str, str], remove: tuple[str, ...] = ()) -> bool:
        """`retag_traces` of one trace, its re-model left to the caller's next model update. True
        when a tag changed."""
        return bool(self.retag_traces({trace_id: (tags, remove)}, remodel=False))

    def retag_traces(self, changes: dict[str, tuple[dict[str, str], tuple[str, ...]]],
                     remodel: bool = True) -> list[str]:
        """Merge each trace's new tags into its tags, new values winning, and drop its keys to remove,
        all traces or none (caller holds the write lock; tracelake/tag_journal.py). The traces whose
        marts read a changed tag are re-modelled, by this call with `remodel`, else by the caller's
        next `update_models`. Returns the traces whose tags changed."""
        import pyarrow as pa  # noqa: PLC0415 - here only: `tracelake sql` starts without pyarrow
        import pyarrow.parquet as pq  # noqa: PLC0415

        before, after, files = {}, {}, {}
        for trace_id, (tags, remove) in changes.items():
            files[trace_id] = min(self._partition(COMMIT_TABLE, trace_id).glob("*.parquet"))
            before[trace_id] = read_tags(files[trace_id])
            merged = {key: value for key, value in {**before[trace_id], **tags}.items() if key not in remove}
            if merged != before[trace_id]:
                after[trace_id] = merged
        if not after:
            return []
        journal = TagJournal.begin(self.pending_dir)
        try:
            for trace_id, merged in after.items():
                table = pq.read_table(files[trace_id])
                index = table.schema.get_field_index("tags")
                column = pa.array([list(merged.items())], type=table.schema.field("tags").type)
                journal.stage(trace_id, table.set_column(index, table.schema.field("tags"), column), files[trace_id])
            journal.decide(traces_to_remodel(before, after, lambda: {**self._all_tags(), **after}, self.trace_ids()))
        except BaseException:
            journal.close()
            raise
        journal.apply()
        if not journal.remodel:
            journal.close()
        else:
            self._tag_journals.append(journal)
            if remodel:
                self.update_models([])
        return sorted(after)

    def _all_tags(self) -> dict[str, dict[str, str]]:
        """Every committed trace's tags, read from its `trace_files` partition."""
        found = {}
        for trace_id in self.trace_ids():
            files = sorted(self._partition(COMMIT_TABLE, trace_id).glob("*.parquet"))
            if files:
                found[trace_id] = read_tags(files[0])
        return found

    def _tag_journals_to_finish(self) -> list[TagJournal]:
        """This process's tag changes and the decided ones of dead runs (their renames applied): the
        traces they list are re-modelled by the model update that takes them."""
        journals, self._tag_journals = self._tag_journals + roll_forward_dead(self.pending_dir), []
        return journals

    def remove_traces(self, trace_ids: list[str]) -> bool:
        """Take traces out (caller holds the write lock; tracelake/removal.py): the intent is
        journaled, a snapshot holding none of their rows (in any table, as trace 1 or 2 of an
        analysis) is published, then their Parquet goes unless a reader of an older snapshot may
        still open it (a later command deletes it then). A kill anywhere leaves the journal, which
        the next command finishes. True when the Parquet is gone too."""
        remaining = self.trace_ids() - set(trace_ids)
        if not remaining:
            raise WarehouseError(f"that would remove every trace of {self.root}; delete the folder instead")
        journal = read_journal(self.root)
        write_journal(self.root, RemovalJournal(journal.unpublished + list(trace_ids), journal.published,
                                                journal.compact))
        crash_point("removal-journaled")
        finished = self.finish_removals()
        if not finished and read_journal(self.root).published:
            print("tracelake: note: a reader of an older snapshot is open: the removed traces' Parquet stays until it "
                  "is done, and the next command deletes it", file=sys.stderr, flush=True)
        return finished

    def finish_removals(self) -> bool:
        """Finish the journaled removals (caller holds the write lock): tracelake/removal.py."""
        return finish_removals(self)

    def partitions_of(self, trace_id: str) -> list[Path]:
        """Where a trace's Parquet lives, the commit partition first."""
        return [self._partition(table, trace_id) for table in [COMMIT_TABLE] + [t for t in TABLES if t != COMMIT_TABLE]]

    def remove_orphans(self) -> None:
        """Drop partitions of traces that never committed and the staging folders of dead runs
        (caller holds the write lock)."""
        for partition in self._orphan_partitions():
            shutil.rmtree(partition, ignore_errors=True)
        remove_dead_staging(self.staging_dir)
        remove_dead_staging(self.root)

    # ---- models ---------------------------------------------------------------------------
    def _refresh_raw_views(self, con: duckdb.DuckDBPyConnection, only: list[str] | None = None) -> None:
        """raw.<table> views over the committed traces' Parquet files (re-pointed if the folder
        moved); with `only`, over those traces' files alone."""
        refresh_raw_views(con, {table: self._raw_view_files(table, only) for table in TABLES}, keep_current=only is None)

    def _raw_view_files(self, table: str, only: list[str] | None = None) -> str:
        """The file list (SQL) a raw view reads: the files of every committed trace's partition of
        `table`, or those of `only`. Named one by one, not as a glob: a snapshot's views then open
        only the files of its own traces, which `tracelake rm` keeps while it has readers."""
        return file_list([path for trace_id in sorted(self.trace_ids() if only is None else only)
                          for path in sorted(self._partition(table, trace_id).glob("*.parquet"))])

    def _load_plan(self) -> IncrementalPlan | None:
        if not self.plan_path.exists():
            return None
        try:
            plan = IncrementalPlan.from_json(self.plan_path.read_text())
        except (ValueError, KeyError, TypeError):
            return None  # unreadable plan: rebuild it
        return plan if plan.fingerprint == project_fingerprint() else None

    def reserved_folders(self) -> list[Path]:
        """The warehouse's own folders: no output is written into or over one of them."""
        return [self.parquet_dir, self.staging_dir, self.dbt_dir]

    def build(self, *, run_tests: bool, full_refresh: bool = False, threads: int = 1,
              on_node_done: NodeProgress | None = None) -> None:
        """Run the dbt project over every trace on a private copy (caller holds the write lock),
        publish it, then re-plan. A failed run (a data test too) leaves the warehouse as it was.
        `threads` run that many dbt nodes at once (the data tests are independent queries)."""
        if not self.trace_ids():
            raise WarehouseError(f"warehouse {self.root} has no traces yet; ingest one first")
        args = ["build", "--threads", str(max(1, threads))]
        if not run_tests:  # data tests and the models' unit tests (given/expected rows, a developer's check)
            args += ["--exclude-resource-type", "test", "--exclude-resource-type", "unit_test"]
        if full_refresh:
            args.append("--full-refresh")
        journals = self._tag_journals_to_finish()
        snapshot = Snapshot(self.db_path)
        try:
            with duckdb.connect(str(snapshot.path)) as con:
                self._refresh_raw_views(con)
                if not full_refresh:
                    forget_tag_modelled(con, self._all_tags(), {t for journal in journals for t in journal.remodel})
            crash_point("dbt-build")
            manifest = parse_project(snapshot.path, self.dbt_dir)
            run_dbt(snapshot.path, self.dbt_dir, args, manifest, on_node_done)
            plan = compile_incremental_plan(snapshot.path, self.dbt_dir, manifest)
            snapshot.publish()
        except BaseException:
            self._tag_journals = [journal for journal in journals if journal.owned] + self._tag_journals
            raise
        finally:
            snapshot.discard()
        finish_journals(journals)
        self._write_plan(plan.to_json())

    def _write_plan(self, text: str) -> None:
        self.dbt_dir.mkdir(parents=True, exist_ok=True)
        replace_file(self.plan_path, text.encode())

    def build_from_shipped_plan(self, plans: ShippedPlans) -> None:
        """Every seed and model created over every trace by executing the plan dbt compiled for the
        package, on a private copy, then published (caller holds the write lock). A new warehouse
        is made this way; so is one whose marts an older project built."""
        trace_ids = sorted(self.trace_ids())
        if not trace_ids:
            raise WarehouseError(f"warehouse {self.root} has no traces yet; ingest one first")
        snapshot = Snapshot(self.db_path)
        try:
            with duckdb.connect(str(snapshot.path)) as con:
                con.execute(f"set checkpoint_threshold = '{UPDATE_CHECKPOINT_THRESHOLD}'")
                self._refresh_raw_views(con)
                crash_point("plan-build")
                execute_build_plan(con, plans, trace_ids, MODEL_UPDATE_WORKERS)
            snapshot.publish()
        finally:
            snapshot.discard()
        self._write_plan(plans.incremental_json)

    def _build_without_plan(self) -> str:
        """Build every model when the warehouse has no current incremental plan: from the shipped
        plan ("compiled"), or with dbt ("dbt") when the project on disk is not the one it was
        compiled from."""
        plans = load_shipped_plans(project_fingerprint())
        if plans is not None:
            self.build_from_shipped_plan(plans)
            return "compiled"
        print("tracelake: the dbt project differs from the plan compiled into TraceLake (edited models?): "
              "building the warehouse with dbt, which takes a while", file=sys.stderr, flush=True)
        self.build(run_tests=False, full_refresh=self.db_path.exists())
        return "dbt"

    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to a private copy of the database, published when the block ends without
        an error (caller holds the write lock)."""
        self.require_existing()
        snapshot = Snapshot(self.db_path)
        try:
            with duckdb.connect(str(snapshot.path)) as con:
                yield con
            snapshot.publish()
        finally:
            snapshot.discard()

    def prepare_update(self, warm_up: bool = False) -> PreparedUpdate:
        """The warehouse opened for a model update (caller holds the write lock): the plan read,
        a private copy of the database open and the raw views current. With `warm_up`, DuckDB's
        Parquet reader is set up too, which only pays when this runs beside other work (ingest:
        while its workers decode a trace); else the first model sets it up."""
        self.finish_removals()  # a removal a killed `rm` began: published before this copy is made
        plan = self._load_plan()
        if plan is None or not self.db_path.exists():  # a dbt run follows, which makes its own copy
            return PreparedUpdate(None, None, None)
        snapshot = Snapshot(self.db_path)
        con = None
        try:
            con = duckdb.connect(str(snapshot.path))
            con.execute(f"set checkpoint_threshold = '{UPDATE_CHECKPOINT_THRESHOLD}'")
            self._refresh_raw_views(con)
            if warm_up:
                con.execute("select count(*) from raw.trace_files").fetchall()  # first Parquet read: ~0.05 s
        except BaseException:
            if con is not None:
                con.close()
            snapshot.discard()
            raise
        return PreparedUpdate(plan, con, snapshot)

    def update_models(self, new_trace_ids: list[str], prepared: PreparedUpdate | None = None) -> str:
        """Bring the marts up to date for new traces, for any trace an interrupted run left
        committed but not modelled, and for the traces whose modelling tags a tag change changed
        (caller holds the write lock); closes `prepared` (made here when not given).

        Returns how: "fast" (the incremental plan executed for these traces), "compiled" (every
        model built from the shipped plan: a new warehouse) or "dbt" (a full dbt run: the project
        was edited).
        """
        journals = self._tag_journals_to_finish()
        try:
            how = self._update_models(new_trace_ids, prepared or self.prepare_update(), journals)
        except BaseException:
            self._tag_journals = [journal for journal in journals if journal.owned] + self._tag_journals
            raise
        finish_journals(journals)
        return how

    def _update_models(self, new_trace_ids: list[str], prepared: PreparedUpdate, journals: list[TagJournal]) -> str:
        with prepared:
            con, plan = prepared.connection, prepared.plan
            if con is None or plan is None:
                return self._build_without_plan()
            committed = self.trace_ids()
            retagged = {trace_id for journal in journals for trace_id in journal.remodel}
            trace_ids = sorted((set(new_trace_ids) | retagged | (committed - _ledger(con))) & committed)
            # Every incremental model reads only the new traces' rows, so in a larger warehouse the
            # raw views see only their partitions during the update: the cost stays that of the new
            # traces, not of the warehouse (DuckDB does not push the trace filter through every view
            # and CTE). Re-pointing the views costs about what scanning a few other traces does.
            others = len(committed) - len(trace_ids)
            scoped = others >= SCOPED_UPDATE_MIN_OTHER_TRACES
            crash_point("models-updating")
            execute_plan(con, plan, trace_ids,
                         scope_sources=(lambda only: self._refresh_raw_views(con, only if scoped else None)),
                         workers=MODEL_UPDATE_WORKERS)
            crash_point("models-updated")
            prepared.publish()
        return "fast"
