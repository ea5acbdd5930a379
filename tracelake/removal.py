"""Removing traces without pulling a file from under a reader, and without leaving their data behind.

A reader (a `tracelake` command, a `tracelake.open` handle) registers before it opens the database:
it holds a shared flock on `<warehouse>/.readers` for as long as its connection lives. Its snapshot's
raw views list exact Parquet files, so the files it may open are those of the traces its snapshot
holds.

`tracelake rm` first records its intent in `<warehouse>/.removal.json` (the journal: written beside
and renamed over, never through a link), then publishes a snapshot without the traces' rows, then
deletes their Parquet only if it can take the readers' lock exclusively at once: no reader of an
older snapshot is left, and every reader after it opens the new snapshot, which names none of those
files. Otherwise the traces stay in the journal and a later command deletes their files. While a
trace is in the journal it is not committed: no command models it again, none treats its partitions
as a dead run's leftovers.

The new snapshot is written by copying only the live rows into an empty database (`compact_copy`):
DuckDB keeps a deleted row's bytes in the file's free blocks, where `read_blob` of the file (or a
disk image) would still find them.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tracelake.cli_exit import disk_full
from tracelake.core.errors import WarehouseError
from tracelake.core.sql_text import sql_identifier, sql_literal
from tracelake.crashpoints import crash_point
from tracelake.lock_file import open_regular_file
from tracelake.snapshot import Snapshot
from tracelake.staging import replace_file, sync_folder

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse

JOURNAL_FILE = ".removal.json"
READERS_FILE = ".readers"
# Bytes of the journal read back: a trace id is 16 hex digits, so this holds thousands of them.
JOURNAL_MAX_BYTES = 1 << 20
# A reader waits this long for the readers' lock, which a writer holds exclusively only for the
# instant of its check: far longer means something else holds it.
READER_WAIT_SECONDS = 60.0
READER_POLL_SECONDS = 0.05
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass
class RemovalJournal:
    """Traces being removed: `unpublished` ones may still have rows in the published database;
    `published` ones have none, and only their Parquet waits for the readers of older snapshots."""

    unpublished: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)
    compact: bool = False  # rows were deleted in place (a full disk): their bytes wait for a rewrite

    @property
    def trace_ids(self) -> set[str]:
        return set(self.unpublished) | set(self.published)

    def __bool__(self) -> bool:
        return bool(self.unpublished or self.published or self.compact)


def _not_ours(path: Path, what: str) -> WarehouseError:
    return WarehouseError(f"{path} is {what}, not a file TraceLake makes; remove it if you trust this folder, "
                          "then re-run")


def _open_regular(path: Path, flags: int) -> int | None:
    return open_regular_file(path, flags, _not_ours)


def read_journal(root: Path) -> RemovalJournal:
    path = root / JOURNAL_FILE
    fd = _open_regular(path, _READ_FLAGS)
    if fd is None:
        return RemovalJournal()
    try:
        text = os.read(fd, JOURNAL_MAX_BYTES)
    finally:
        os.close(fd)
    try:
        data = json.loads(text)
        return RemovalJournal([str(t) for t in data["unpublished"]], [str(t) for t in data["published"]],
                              bool(data.get("compact", False)))
    except (ValueError, KeyError, TypeError):
        raise WarehouseError(f"{path} (the journal of an interrupted `tracelake rm`) is unreadable; re-run the "
                             "rm of the traces it removed, then delete the file") from None


def write_journal(root: Path, journal: RemovalJournal) -> None:
    """Replace the journal whole (renamed over, so a kill leaves the old one or the new one), or
    delete it when nothing is pending. The folder is synced: a power cut keeps the intent."""
    path = root / JOURNAL_FILE
    if not journal:
        path.unlink(missing_ok=True)
        sync_folder(root)
        return
    replace_file(path, json.dumps({"unpublished": sorted(set(journal.unpublished)),
                                   "published": sorted(set(journal.published)),
                                   "compact": journal.compact}).encode(), durable=True)


def _readers_file(root: Path, create: bool) -> int | None:
    """The readers' lock file, opened for flock only (never written): made when missing and the
    folder is writable."""
    fd = _open_regular(root / READERS_FILE, _READ_FLAGS)
    if fd is None and create:
        try:
            fd = _open_regular(root / READERS_FILE, _READ_FLAGS | os.O_CREAT)
        except PermissionError:
            return None  # a warehouse this user can only read: no writer of theirs removes anything
    return fd


def register_reader(root: Path) -> int | None:
    """Hold a shared lock on the readers' file: writers then keep every Parquet file this reader's
    snapshot names. The caller closes the descriptor when its connection is done."""
    fd = _readers_file(root, create=True)
    if fd is None:
        return None
    deadline = time.monotonic() + READER_WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise WarehouseError(f"{root / READERS_FILE} has been locked exclusively for over "
                                     f"{READER_WAIT_SECONDS:g} s, which no TraceLake writer does; find the process "
                                     "holding it (fuser), then re-run") from None
            time.sleep(READER_POLL_SECONDS)


def release_with(con: duckdb.DuckDBPyConnection, fd: int | None) -> weakref.finalize:
    """Close `fd` (a reader's registration) when `con` is gone, or when the returned finalizer is called."""
    return weakref.finalize(con, _close, fd)


def _close(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def no_readers(root: Path) -> bool:
    """Whether no reader is registered now (the readers' lock is taken exclusively and released at
    once): a reader registering after this opens the snapshot already published, so the files only
    older snapshots name can go."""
    fd = _readers_file(root, create=True)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def compact_copy(con: duckdb.DuckDBPyConnection, live: Path, removed: set[str]) -> None:
    """Fill the empty database `con` is connected to with `live`'s schema and every row that names
    none of the `removed` traces (as `trace_id` or `trace2_id`): no byte of theirs is written."""
    con.execute(f"attach {sql_literal(str(live))} as removal_source (read_only)")  # DuckDB 1.5 takes no parameter here
    try:
        target = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        con.execute(f"copy from database removal_source to {sql_identifier(target)} (schema)")
        columns = con.execute("select schema_name, table_name, list(column_name) from duckdb_columns() "
                              "where database_name = 'removal_source' and not internal group by all").fetchall()
        tables = {(s, t) for s, t in con.execute("select schema_name, table_name from duckdb_tables() "
                                                 "where database_name = 'removal_source'").fetchall()}
        for schema, table, names in columns:
            if (schema, table) not in tables:
                continue  # a view
            keep = " and ".join(f"({sql_identifier(c)} is null or {sql_identifier(c)} not in (select unnest($ids)))"
                                for c in ("trace_id", "trace2_id") if c in names) or "true"
            name = f"{sql_identifier(schema)}.{sql_identifier(table)}"
            con.execute(f"insert into {sql_identifier(target)}.{name} select * from removal_source.{name} where {keep}",
                        {"ids": sorted(removed)} if keep != "true" else None)
    finally:
        con.execute("detach removal_source")


def finish_removals(warehouse: Warehouse) -> bool:
    """Finish the journaled removals of `warehouse` (its caller holds the write lock): publish a
    snapshot without the rows of those not yet published, delete the Parquet no reader needs, and
    rewrite a database whose rows a full disk made `rm` delete in place. True when nothing is left
    pending."""
    journal = read_journal(warehouse.root)
    if journal.unpublished:
        try:
            _publish_without(warehouse, journal.trace_ids)
        except Exception as exc:
            if not disk_full(exc):
                raise
            _remove_rows_in_place(warehouse, journal.trace_ids)  # no room for a copy
            journal.compact = True
        journal = RemovalJournal([], journal.published + journal.unpublished, journal.compact)
        write_journal(warehouse.root, journal)
        crash_point("removal-published")
        for folder in ("target", "logs"):  # dbt's SQL and logs name the traces it modelled; the next run writes them
            shutil.rmtree(warehouse.dbt_dir / folder, ignore_errors=True)
    if journal.published and no_readers(warehouse.root):
        for trace_id in journal.published:
            for partition in warehouse.partitions_of(trace_id):
                shutil.rmtree(partition, ignore_errors=True)
                crash_point("removal-parquet")
        journal = RemovalJournal([], [], journal.compact)
        write_journal(warehouse.root, journal)
    if journal.compact and not journal.published:
        try:
            _publish_without(warehouse, set())
            journal.compact = False
        except Exception as exc:
            if not disk_full(exc):
                raise
            size = warehouse.db_path.stat().st_size / 1e6
            print(f"tracelake: note: the disk has no room to rewrite {warehouse.db_path} ({size:.1f} MB): until a later "
                  "command can, its free blocks still hold bytes of the removed rows", file=sys.stderr, flush=True)
        write_journal(warehouse.root, journal)
    return not journal


def _publish_without(warehouse: Warehouse, removed: set[str]) -> None:
    """Publish a snapshot written by copying every row but those of `removed` (and the raw views
    over the traces still committed)."""
    snapshot = Snapshot(warehouse.db_path, copy=False)
    try:
        with duckdb.connect(str(snapshot.path)) as con:
            compact_copy(con, warehouse.db_path, removed)
            warehouse._refresh_raw_views(con)
        snapshot.publish()
    finally:
        snapshot.discard()


def _remove_rows_in_place(warehouse: Warehouse, removed: set[str]) -> None:
    """Delete the rows of `removed` in the published database itself, in one transaction (DuckDB's
    WAL makes a kill roll it back or forward), when the disk has no room for a copy. DuckDB lets no
    reader in meanwhile (a reader retries while a writer has the file: READ_RETRY_SECONDS)."""
    try:
        con = duckdb.connect(str(warehouse.db_path))
    except duckdb.IOException as exc:
        raise WarehouseError(f"the disk is full and {warehouse.db_path} is open in another process, so `rm` can "
                             f"neither copy it nor change it in place: close the readers (or free "
                             f"{warehouse.db_path.stat().st_size / 1e6:.0f} MB), then re-run ({exc})") from None
    with con:
        tables = con.execute("select t.schema_name, t.table_name, list(c.column_name) from duckdb_tables() t "
                             "join duckdb_columns() c on c.table_oid = t.table_oid "
                             "where t.database_name = current_database() group by all").fetchall()
        con.begin()
        for schema, table, names in tables:
            for column in ("trace_id", "trace2_id"):
                if column in names:
                    con.execute(f"delete from {sql_identifier(schema)}.{sql_identifier(table)} where {sql_identifier(column)} in "
                                "(select unnest($ids))", {"ids": sorted(removed)})
        warehouse._refresh_raw_views(con)
        con.commit()
        crash_point("removal-in-place")
        con.execute("checkpoint")

