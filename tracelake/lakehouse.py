"""A warehouse whose every table is a DuckLake table: Parquet data files under `<warehouse>/lake/`
and a catalog (SQLite in the folder, or PostgreSQL) recording snapshots.

A write is one DuckLake transaction, so one snapshot: a trace's raw rows, every mart's rows of it and
its ledger row commit together or not at all, and the commit's cost does not depend on how many
traces the warehouse holds (nothing is copied). Readers attach one snapshot read-only and never
block a writer. A kill at any point leaves the catalog at its last commit; the data files a killed
transaction wrote are referenced by no snapshot, and `tracelake vacuum` deletes them.

The marts are made by the plans compiled into the package (tracelake/shipped_plan.py), executed on
the lake inside the transaction: the build plan for a new warehouse, the incremental plan for every
later trace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb

from tracelake import lake_writers
from tracelake.core.errors import WarehouseError
from tracelake.core.sql_text import sql_identifier, sql_literal
from tracelake.crashpoints import crash_point
from tracelake.dbt_runner import NodeProgress, project_fingerprint
from tracelake.ingest.staged import TABLES, StagedTrace
from tracelake.lake_catalog import (
    COMPILED_NAME,
    DATA_FOLDER,
    LOCAL_CATALOG,
    SQLITE_FILE,
    LakeLayout,
    _without_password as catalog_without_password,
    attach_target,
    catalog_name,
    extensions_for,
    read_layout,
    write_layout,
)
from tracelake.lake_extensions import extension_directory
from tracelake.lake_reader import LAKE_ALIAS, copy_scope
from tracelake.lake_scope import model_new_traces, scope_to_traces
from tracelake.local_catalog import current_snapshot, recorded_data_path, repoint_data_path
from tracelake.removal import register_reader, release_with
from tracelake.shipped_plan import ShippedPlans, load_shipped_plans, select_for, trace_id_list
from tracelake.snapshot import PreparedUpdate
from tracelake.sql_guard import lock_down
from tracelake.staging import remove_dead_staging
from tracelake.task_models import precomputed_models
from tracelake.warehouse import DATABASE_FILE, LEDGER_TABLE, Warehouse
from tracelake.working_copies import keep_copy, kept_copy, read_other_traces

RAW_SCHEMA = "raw"
PLAN_TABLE = "tracelake.model_plan"  # the fingerprint of the plan the marts were built with
# Rows a DuckLake insert keeps inside the catalog instead of writing a Parquet file: none, so every
# row of every table is in a data file that `tracelake files` can name and other engines read.
DATA_INLINING_ROW_LIMIT = 0


class LakeWarehouse(Warehouse):
    """The warehouse folder as a DuckLake lakehouse (see the module docstring)."""

    def __init__(self, root: Path, catalog: str | None = None) -> None:
        super().__init__(root)
        self.given_catalog = catalog
        self.data_path = self.root / DATA_FOLDER
        self.layout_path = self.root / "lake.json"
        self.db_path = self.root / SQLITE_FILE  # what `exists` means for the local catalog
        self._queued: list[StagedTrace] = []
        self._known: set[str] = set()  # the committed trace ids when the queue began
        self._ids_seen: tuple[int, set[str]] | None = None  # a local catalog's snapshot and its trace ids, last read

    def reserved_folders(self) -> list[Path]:
        return [self.data_path, *super().reserved_folders()]

    # ---- the catalog -------------------------------------------------------------------
    def layout(self) -> LakeLayout:
        layout = read_layout(self.root)
        if layout is None:
            raise WarehouseError(f"no warehouse at {self.root}; run `tracelake ingest TRACE --warehouse {self.root}` first")
        return layout

    def exists(self) -> bool:
        return self.layout_path.exists()

    def require_existing(self) -> None:
        self.layout()

    def _config(self, layout: LakeLayout) -> lake_writers.DuckDBConfig:
        # allow_persistent_secrets is set before the attach uses the secret manager, which freezes it
        return {"extension_directory": extension_directory(*extensions_for(layout)).as_posix(),
                "autoinstall_known_extensions": False, "autoload_known_extensions": True,
                **lake_writers.secrets_config(layout)}

    def connect_lake(self, read_only: bool, snapshot: int | None = None,
                     layout: LakeLayout | None = None, own_instance: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection whose database is the lake (its current snapshot, or `snapshot`), not locked
        down. Opened as the main database, so every cursor of it names the tables as dbt did; with
        `own_instance` (or a snapshot), attached to a DuckDB of its own and made current by USE."""
        layout = layout or self.layout()
        target = attach_target(self.root, layout, self.given_catalog)
        try:
            if snapshot is None and not own_instance:
                return duckdb.connect(target, read_only=read_only, config=self._config(layout))
            con = duckdb.connect(config=self._config(layout))
            options = ["read_only"] * read_only + ([f"snapshot_version {int(snapshot)}"] if snapshot is not None else [])
            try:
                con.execute(f"attach {sql_literal(target)} as {sql_identifier(catalog_name(layout))}"
                            + (f" ({', '.join(options)})" if options else ""))
                con.execute(f"use {sql_identifier(catalog_name(layout))}")
            except BaseException:
                con.close()
                raise
            return con
        except duckdb.Error as exc:
            url = self.postgres_url(layout)
            if url is not None:
                raise WarehouseError(lake_writers.catalog_problem(url, exc)) from None
            raise WarehouseError(f"cannot open the catalog of {self.root} ({layout.catalog}): "
                                 f"{str(exc).splitlines()[0]}") from None

    def create(self, catalog: str) -> None:
        """Make the folder a lakehouse with `catalog` (caller holds the write lock; with a PostgreSQL
        catalog, writers elsewhere may be creating it too: they take turns)."""
        self.data_path.mkdir(parents=True, exist_ok=True)
        layout = LakeLayout(catalog_without_password(catalog))
        name = sql_identifier(catalog_name(layout))
        target = attach_target(self.root, layout, catalog)
        try:
            with lake_writers.creating(self.postgres_url(layout), layout), \
                    duckdb.connect(config=self._config(layout)) as con:
                con.execute(f"attach {sql_literal(target)} as {name} (data_path {sql_literal(self.data_path.as_posix() + '/')})")
                con.execute(f"call {name}.set_option('data_inlining_row_limit', {DATA_INLINING_ROW_LIMIT})")
                con.execute(f"create schema if not exists {name}.{RAW_SCHEMA}")
        except duckdb.Error as exc:
            raise WarehouseError(f"cannot create the catalog of {self.root} ({layout.catalog}): "
                                 f"{lake_writers.scrubbed(str(exc).splitlines()[0], catalog)}") from None
        crash_point("lake-catalog-created")
        write_layout(self.root, catalog)
        snapshot = current_snapshot(self._local_catalog())
        self._ids_seen = None if snapshot is None else (snapshot, set())  # made here: no trace yet

    # ---- many writers (tracelake/lake_writers.py) ------------------------------------------
    def intended_layout(self) -> LakeLayout:
        """The recorded layout, or the one a first write creates."""
        return read_layout(self.root) or LakeLayout(catalog_without_password(self.given_catalog or LOCAL_CATALOG))

    def postgres_url(self, layout: LakeLayout) -> str | None:
        """The PostgreSQL URL to connect with (the given one when it names the catalog: it may carry
        the password); None for a local catalog."""
        if not lake_writers.is_postgres(layout):
            return None
        return attach_target(self.root, layout, self.given_catalog).removeprefix("ducklake:postgres:")

    def prepare_for_writing(self) -> None:
        """A PostgreSQL catalog is reached before anything is written (one line when it cannot be)."""
        layout = self.intended_layout()
        url = self.postgres_url(layout)
        if url is not None:
            lake_writers.check_reachable(url, layout)
        super().prepare_for_writing()

    @contextmanager
    def write_lock(self, wait: bool = True) -> Iterator[bool]:
        """The fcntl writers' lock for a local catalog; none for a PostgreSQL one, whose writers on
        many machines keep apart through DuckLake's transactions (tracelake/lake_writers.py)."""
        if lake_writers.shares_fcntl_lock(self.intended_layout()):
            with super().write_lock(wait) as held:
                yield held
        else:
            yield True

    def _commit_traces(self, plans: ShippedPlans, queued: list[StagedTrace]) -> str:
        """The queued traces committed with their marts in one transaction, run again when DuckLake
        refuses it as a conflict with another writer's; traces another writer committed meanwhile
        are left out."""
        layout = self.layout()

        def attempt() -> str:
            with self.writing() as con:
                done = lake_writers.committed_among(con, f"{RAW_SCHEMA}.trace_files", [s.trace_id for s in queued])
                return self._write_traces(con, plans, [s for s in queued if s.trace_id not in done])

        with lake_writers.claiming(self.postgres_url(layout), layout, [s.trace_id for s in queued]):
            return lake_writers.retry_on_conflict(attempt, f"committing to {self.root}")

    # ---- reading ---------------------------------------------------------------------------
    def connect_read_only(self, repair: bool = True, snapshot: int | None = None) -> duckdb.DuckDBPyConnection:
        """A locked-down read-only connection to the current snapshot (or `snapshot`), registered as
        a reader while it lives: `vacuum` deletes no file it may read."""
        self.require_existing()
        if repair and self.needs_repair():
            self.repair_if_idle()
        if snapshot is not None:
            from tracelake.lake_maintenance import check_snapshot  # noqa: PLC0415 - that module imports this one

            with self.connect_lake(read_only=True) as con:
                check_snapshot(con, snapshot)
        return self._registered(lambda: self.connect_lake(read_only=True, snapshot=snapshot))

    def _registered(self, connect: Callable[[], duckdb.DuckDBPyConnection]) -> duckdb.DuckDBPyConnection:
        """The connection `connect` opens, locked down and registered as a reader while it lives:
        `vacuum` deletes no file it may read."""
        registration = register_reader(self.root)
        try:
            con = connect()
        except BaseException:
            if registration is not None:
                os.close(registration)
            raise
        release = release_with(con, registration)
        try:
            lock_down(con, self.root, self.data_path)
        except BaseException:
            con.close()
            release()
            raise
        return con

    def connect_analysis(self, trace_ids: Sequence[str], repair: bool = True,
                         reads_findings: bool = False) -> duckdb.DuckDBPyConnection:
        """A locked-down read-only connection to the working copy of an analysis of `trace_ids`
        (tracelake/lake_reader.py) at the current snapshot, registered as a reader while it lives;
        the copy this process made last when it still serves (tracelake/working_copies.py)."""
        self.require_existing()
        if repair and self.needs_repair():
            self.repair_if_idle()
        ids = sorted(set(trace_ids))
        return self._registered(lambda: kept_copy(self.root, self._local_catalog(), ids, reads_findings)
                                or self._new_working_copy(ids))

    def _new_working_copy(self, trace_ids: list[str]) -> duckdb.DuckDBPyConnection:
        layout = self.layout()
        target = attach_target(self.root, layout, self.given_catalog)
        con = duckdb.connect(config=self._config(layout))
        try:
            con.execute(f"attach {sql_literal(target)} as {LAKE_ALIAS} (read_only)")
            snapshot, scope = copy_scope(con, trace_ids, read_other_traces(_shipped_plans()))
        except duckdb.Error as exc:
            con.close()
            raise WarehouseError(f"cannot read the catalog of {self.root} ({layout.catalog}): "
                                 f"{lake_writers.scrubbed(str(exc).splitlines()[0], target)}") from None
        except BaseException:
            con.close()
            raise
        return keep_copy(self.root, snapshot, scope, con)

    def _query_ids(self, table: str) -> set[str]:
        if not self.exists():
            return set()
        with self.connect_lake(read_only=True) as con:
            try:
                return {row[0] for row in con.execute(f"select trace_id from {table}").fetchall()}
            except duckdb.CatalogException:
                return set()

    def trace_ids(self) -> set[str]:
        """The committed traces. A local catalog whose snapshot is the one they were last read at is
        not opened again (0.2-0.4 s an open: an ingest asks before it decodes and again once it
        holds the lock)."""
        snapshot = current_snapshot(self._local_catalog())
        if snapshot is not None and self._ids_seen is not None and self._ids_seen[0] == snapshot:
            return set(self._ids_seen[1])
        ids = self._query_ids(f"{RAW_SCHEMA}.trace_files")
        if snapshot is not None and snapshot == current_snapshot(self._local_catalog()):
            self._ids_seen = (snapshot, set(ids))
        return ids

    def modelled_trace_ids(self) -> set[str]:
        return self._query_ids(LEDGER_TABLE)

    def snapshots(self) -> list[tuple[int, str]]:
        """(snapshot id, its time) of every snapshot the catalog keeps, oldest first."""
        with self.connect_lake(read_only=True) as con:
            rows = con.execute("select snapshot_id, snapshot_time::varchar from ducklake_snapshots(current_database()) "
                               "order by 1").fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def snapshot_of(self, con: duckdb.DuckDBPyConnection) -> int | None:
        row = con.execute("select id from ducklake_current_snapshot(current_database())").fetchone()
        return int(row[0]) if row else None

    # ---- what dead runs leave: only staging folders (a transaction commits whole or not at all),
    # and a local catalog's data path when the folder was moved or copied
    def needs_repair(self, con: duckdb.DuckDBPyConnection | None = None) -> bool:
        from tracelake.staging import has_dead_staging  # noqa: PLC0415 - the base module's own import

        return has_dead_staging(self.staging_dir) or has_dead_staging(self.root) or self._moved()

    def _local_catalog(self) -> Path | None:
        layout = read_layout(self.root)
        return self.root / SQLITE_FILE if layout is not None and layout.catalog == LOCAL_CATALOG else None

    def _moved(self) -> bool:
        """Whether the local catalog names another folder's data path (the folder was moved or copied)."""
        recorded = recorded_data_path(self._local_catalog())
        return recorded is not None and recorded != self.data_path.as_posix() + "/"

    def repair(self) -> list[str]:
        self.remove_orphans()
        catalog = self._local_catalog()
        if catalog is not None and self._moved():
            repoint_data_path(catalog, self.data_path.as_posix() + "/")
        return []

    def remove_orphans(self) -> None:
        remove_dead_staging(self.staging_dir)
        remove_dead_staging(self.root)

    def _orphan_partitions(self, committed: set[str] | None = None) -> list[Path]:
        return []

    def finish_removals(self) -> bool:
        return True

    # ---- writing ----------------------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection in one lake transaction, committed (one snapshot) when the block ends
        without an error (caller holds the write lock). The DuckDB is the connection's own: after a
        commit DuckLake refused, DuckDB 1.5.5 never lets go of a cached instance, and the next
        connect to the same lake would wait for it forever."""
        con = self.connect_lake(read_only=False, own_instance=True)
        try:
            con.begin()
            yield con
            crash_point("lake-commit")
            con.commit()
            crash_point("lake-committed")
        finally:
            con.close()

    def commit(self, staged: StagedTrace) -> bool:
        """Queue a staged trace for the next model update, which commits its rows and its marts in
        one transaction (caller holds the write lock). False if the warehouse has it already."""
        if not self._queued:  # once per commit, not per trace: the commit checks again in its transaction
            self._known = self.trace_ids()
        if staged.trace_id in self._known or any(q.trace_id == staged.trace_id for q in self._queued):
            self.release_staging_dir(Path(staged.staging_dir))
            return False
        self._queued.append(staged)
        return True

    def prepare_update(self, warm_up: bool = False) -> PreparedUpdate:
        """Nothing to prepare but the lake itself, made here when the folder is new, re-pointed at
        its own data files when it was moved or copied (a write would land in the old folder)."""
        if not self.exists():
            self.create(self.given_catalog or LOCAL_CATALOG)
        elif self._moved():
            self.repair()
        return PreparedUpdate(None, None, None)

    def update_models(self, new_trace_ids: list[str], prepared: PreparedUpdate | None = None) -> str:
        """Commit the queued traces' raw rows and bring every mart up to date for them, in one
        transaction (caller holds the write lock). "compiled" when the marts were created."""
        if prepared is not None:
            prepared.close()
        queued, self._queued = self._queued, []
        plans = _shipped_plans()
        if not self.exists():
            raise WarehouseError(f"no warehouse at {self.root}")
        try:
            how = self._commit_traces(plans, queued)
        finally:
            for staged in queued:
                self.release_staging_dir(Path(staged.staging_dir))
        return how

    def _write_traces(self, con: duckdb.DuckDBPyConnection, plans: ShippedPlans, queued: list[StagedTrace]) -> str:
        current = built_plan(con) == plans.build.fingerprint
        if not queued and current:
            return "none"
        for table in TABLES:
            self._insert_raw(con, table, queued)
        crash_point("lake-raw-inserted")
        if not current:  # a new lake, or marts an older TraceLake built: one set-based build of every trace
            rebuild_marts(con, plans)
            return "compiled"
        new = sorted(staged.trace_id for staged in queued)
        precomputed = {staged.trace_id: precomputed_models(staged) for staged in queued}  # by Ray tasks
        update_marts(con, plans, new, precomputed=precomputed, staged=queued)
        return "fast"

    def _insert_raw(self, con: duckdb.DuckDBPyConnection, table: str, queued: list[StagedTrace]) -> None:
        """The queued traces' rows of one raw table in ONE insert, so one data file per commit, not one
        per trace: a scan lists and prunes every file of the table, and 900 per-trace files made adding
        one trace to 1,000 (bench/lake_scale.py) cost 4x what it costs into a fresh warehouse."""
        selects = []
        for staged in sorted(queued, key=lambda s: s.trace_id):
            files = sorted((Path(staged.staging_dir) / table).glob("*.parquet"))
            if files:
                listed = ", ".join(sql_literal(path.as_posix()) for path in files)
                selects.append(f"select *, {sql_literal(staged.trace_id)}::varchar as trace_id "
                               f"from read_parquet([{listed}], union_by_name = true)")
        if not selects:
            return
        select = " union all by name ".join(selects)
        if _has_relation(con, f"{RAW_SCHEMA}.{table}"):
            con.execute(f"insert into {RAW_SCHEMA}.{table} by name {select}")
        else:
            con.execute(f"create table {RAW_SCHEMA}.{table} as {select}")

    def retag_traces(self, changes: dict[str, tuple[dict[str, str], tuple[str, ...]]],
                     remodel: bool = True) -> list[str]:
        """Merge each trace's new tags into its tags and drop its keys to remove, and re-model the
        traces whose marts read a changed tag: one transaction, all traces or none (caller holds
        the write lock). `remodel` is moot: the re-model is always in the same commit."""
        from tracelake.tag_journal import traces_to_remodel  # noqa: PLC0415 - reads trace files, as the base does

        with self.writing() as con:
            every = self._tags(con)
            before = {trace_id: every.get(trace_id, {}) for trace_id in changes}
            after = {}
            for trace_id, (tags, remove) in changes.items():
                merged = {key: value for key, value in {**before[trace_id], **tags}.items() if key not in remove}
                if merged != before[trace_id]:
                    after[trace_id] = merged
            for trace_id, merged in after.items():
                con.execute(f"update {RAW_SCHEMA}.trace_files set tags = map(?::varchar[], ?::varchar[]) where trace_id = ?",
                            [list(merged), list(merged.values()), trace_id])
            again = traces_to_remodel(before, after, lambda: {**every, **after}, set(every)) if after else set()
            if again:
                update_marts(con, _shipped_plans(), sorted(again), replacing=True)
        return sorted(after)

    @staticmethod
    def _tags(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
        rows = con.execute(f"select trace_id, map_keys(tags), map_values(tags) from {RAW_SCHEMA}.trace_files").fetchall()
        return {trace_id: dict(zip(keys or [], values or [])) for trace_id, keys, values in rows}

    def remove_traces(self, trace_ids: list[str]) -> bool:
        """Delete every row that names the traces (as `trace_id` or `trace2_id`) from every table,
        in one transaction (caller holds the write lock). Their bytes stay in data files older
        snapshots read until `tracelake vacuum` expires those snapshots."""
        remaining = self.trace_ids() - set(trace_ids)
        if not remaining:
            raise WarehouseError(f"that would remove every trace of {self.root}; delete the folder instead")
        id_list = trace_id_list(sorted(trace_ids))
        with self.writing() as con:
            columns = con.execute(
                "select c.table_schema, c.table_name, list(c.column_name) from information_schema.columns c "
                "join information_schema.tables t using (table_catalog, table_schema, table_name) "
                "where c.table_catalog = current_database() and t.table_type = 'BASE TABLE' "
                "and c.column_name in ('trace_id', 'trace2_id') group by all order by all").fetchall()
            for schema, table, names in columns:
                match = " or ".join(f"{name} in ({id_list})" for name in sorted(names))
                con.execute(f"delete from {sql_identifier(schema)}.{sql_identifier(table)} where {match}")
        return True

    runs_data_tests = False

    def build(self, *, run_tests: bool, full_refresh: bool = False, threads: int = 1,
              on_node_done: NodeProgress | None = None) -> None:
        """Every mart rebuilt over every trace from the compiled plan, in one transaction (caller
        holds the write lock). dbt and its data tests run on the classic layout only."""
        if not self.trace_ids():
            raise WarehouseError(f"warehouse {self.root} has no traces yet; ingest one first")
        with self.writing() as con:
            rebuild_marts(con, _shipped_plans())


def _shipped_plans() -> ShippedPlans:
    plans = load_shipped_plans(project_fingerprint())
    if plans is None:
        raise WarehouseError("the dbt project differs from the plan compiled into TraceLake (edited models?); "
                             "a lakehouse warehouse runs only the compiled plan: run `python -m tracelake.plan_compiler`")
    return plans


def _has_relation(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    schema, _, table = name.rpartition(".")
    row = con.execute("select count(*) from information_schema.tables where table_catalog = current_database() "
                      "and table_schema = ? and table_name = ?", [schema or "main", table]).fetchone()
    return bool(row and row[0])


def _in_catalog(con: duckdb.DuckDBPyConnection) -> Callable[[str], str]:
    """SQL dbt compiled under the catalog "warehouse", rewritten for the lake's own name."""
    row = con.execute("select current_database()").fetchone()
    name = str(row[0]) if row else COMPILED_NAME
    if name == COMPILED_NAME:
        return lambda sql: sql
    return lambda sql: sql.replace(f'"{COMPILED_NAME}".', f"{sql_identifier(name)}.")


def built_plan(con: duckdb.DuckDBPyConnection) -> str | None:
    """The fingerprint of the plan the lake's marts were built with; None before the first build."""
    if not _has_relation(con, PLAN_TABLE):
        return None
    row = con.execute(f"select fingerprint from {PLAN_TABLE}").fetchone()
    return str(row[0]) if row else None


def rebuild_marts(con: duckdb.DuckDBPyConnection, plans: ShippedPlans) -> None:
    """Every mart built over every trace of the lake, and the plan recorded, inside `con`'s transaction."""
    trace_ids = sorted(str(r[0]) for r in con.execute(f"select trace_id from {RAW_SCHEMA}.trace_files").fetchall())
    build_marts(con, plans, trace_ids)
    schema = PLAN_TABLE.split(".")[0]
    con.execute(f"create schema if not exists {schema}")
    con.execute(f"create or replace table {PLAN_TABLE} as select ?::varchar as fingerprint, now() as built_at",
                [plans.build.fingerprint])


def build_marts(con: duckdb.DuckDBPyConnection, plans: ShippedPlans, trace_ids: list[str]) -> None:
    """Every seed and model of the build plan, created on the lake inside `con`'s transaction."""
    plan, named = plans.build, _in_catalog(con)
    for schema in plan.schemas:
        con.execute(f"create schema if not exists {sql_identifier(schema)}")
    for seed in plan.seeds:
        path = sql_literal(plans.seed_file(seed).as_posix())
        con.execute(f"create or replace table {named(seed.relation)} as select * from read_parquet({path})")
    for node in plan.nodes:
        kind = "view" if node.materialized == "view" else "table"
        select = select_for(node.sql, trace_ids) if node.materialized == "incremental" else node.sql.strip().rstrip(";")
        con.execute(f"create or replace {kind} {named(node.relation)} as ({named(select)})")


def _rows_from_tasks(name: str, trace_ids: list[str], precomputed: dict[str, dict[str, Path]] | None,
                    ) -> tuple[list[str], str | None]:
    """The traces whose rows of model `name` are still to compute, and a SELECT of the rows that
    tasks computed (tracelake/task_models.py), None when none did."""
    done = {t: (precomputed or {}).get(t, {}).get(name) for t in trace_ids}
    files = [path for path in done.values() if path is not None]
    if not files:
        return trace_ids, None
    listed = ", ".join(sql_literal(path.as_posix()) for path in files)
    return [t for t, path in done.items() if path is None], f"select * from read_parquet([{listed}], union_by_name = true)"


def update_marts(con: duckdb.DuckDBPyConnection, plans: ShippedPlans, trace_ids: list[str],
                 replacing: bool = False, precomputed: dict[str, dict[str, Path]] | None = None,
                 staged: list[StagedTrace] | None = None) -> None:
    """The rows of `trace_ids` written into every incremental model, inside `con`'s transaction;
    with `replacing`, their old rows are deleted first (new traces have none: the delete would
    read every data file of every mart for nothing). The models read only those traces' raw rows
    (tracelake/lake_scope.py), so the cost is theirs, not the warehouse's. A trace's rows of a
    model in `precomputed` (trace id -> model name -> Parquet file, written by a Ray task:
    tracelake/task_models.py) are read from that file instead. New traces no task modelled are
    modelled from their `staged` files alone when they can be (tracelake/lake_scope.py)."""
    if not trace_ids:
        return
    id_list, named = trace_id_list(trace_ids), _in_catalog(con)
    new = [s for s in staged or [] if s.trace_id in set(trace_ids)]
    if len(new) == len(trace_ids) and not replacing and not any((precomputed or {}).values()):
        if model_new_traces(con, plans, new, named):
            return
    scoped = scope_to_traces(con, plans, trace_ids, named)
    for model in plans.incremental.models:
        if replacing:
            con.execute(f"delete from {named(model.relation)} where trace_id in ({id_list})")
        left, computed = _rows_from_tasks(model.name, trace_ids, precomputed)
        if left:
            con.execute(f"insert into {named(model.relation)} by name select * from ({scoped(model.select_for(left))})")
        if computed is not None:
            con.execute(f"insert into {named(model.relation)} by name {computed}")


def is_lake(root: Path) -> bool:
    return (root.expanduser() / "lake.json").exists()


def open_warehouse(root: Path, catalog: str | None = None) -> Warehouse:
    """The warehouse at `root`. A new one is a lakehouse with the catalog asked for (`local` when none
    is), or the classic single-file layout when `classic` is asked for; an existing one is what it is."""
    from tracelake.lake_catalog import CLASSIC, requested_catalog  # noqa: PLC0415

    requested = requested_catalog(catalog)
    root = root.expanduser()
    classic = (root / DATABASE_FILE).exists()
    if is_lake(root):
        if requested == CLASSIC:
            raise WarehouseError(f"{root} is a lakehouse warehouse; --catalog classic (or $TRACELAKE_CATALOG) "
                                 "applies to a new warehouse: give another --warehouse folder")
        return LakeWarehouse(root, requested)
    if classic or requested == CLASSIC:
        if requested not in (None, CLASSIC):
            raise WarehouseError(f"{root} is a warehouse of the classic layout (warehouse.duckdb); a catalog applies "
                                 "to a new lakehouse warehouse: give another --warehouse folder, or unset $TRACELAKE_CATALOG")
        return Warehouse(root)
    if requested is not None:
        return LakeWarehouse(root, requested)
    # a lake whose creator was killed before it wrote lake.json: the next write finishes it
    if (root / SQLITE_FILE).exists():
        return LakeWarehouse(root, None)
    if (root / DATA_FOLDER).is_dir():
        # a writer may be making it right now (it holds the writers' lock): a writer opened here waits
        # for that lock and then finds the catalog recorded
        creating = LakeWarehouse(root, None)
        with creating.write_lock(wait=False) as free:
            if not free:
                return creating
        raise WarehouseError(f"{root} was being made a lakehouse warehouse when its writer stopped, before it recorded "
                             "its catalog: re-run with the same --catalog (or $TRACELAKE_CATALOG)")
    return LakeWarehouse(root, LOCAL_CATALOG)


__all__ = ["LOCAL_CATALOG", "LakeWarehouse", "is_lake", "open_warehouse"]
