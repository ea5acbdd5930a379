"""A writer's private copy of the warehouse database, published by a rename, and a model update
open on one (tracelake/warehouse.py)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from tracelake.crashpoints import crash_point
from tracelake.staging import StagingFolder

if TYPE_CHECKING:
    from tracelake.shipped_plan import IncrementalPlan


class Snapshot:
    """A private copy of the warehouse database that one writer changes, published by a rename.

    It sits in a locked staging folder under the warehouse (same file system) with the same file
    name, so DuckDB gives it the same catalog name and the views dbt writes into it stay valid.
    Without `copy` it starts empty (a writer that copies only the rows it keeps)."""

    def __init__(self, db_path: Path, copy: bool = True) -> None:
        self.live = db_path
        self._folder = StagingFolder(db_path.parent, "db")
        self.path = self._folder.path / db_path.name
        if copy and db_path.exists():
            _copy_file(db_path, self.path)
            wal = db_path.with_name(db_path.name + ".wal")
            if wal.exists():  # left by an in-place writer that died: DuckDB replays it on open
                _copy_file(wal, self.path.with_name(self.path.name + ".wal"))

    def publish(self) -> None:
        """Make the copy the warehouse (its connections must be closed)."""
        if self.path.with_name(self.path.name + ".wal").exists():
            with duckdb.connect(str(self.path)) as con:
                con.execute("checkpoint")
        crash_point("before-publish")
        os.replace(self.path, self.live)
        # a WAL an in-place writer left beside the old file was replayed into the copy: beside the
        # new file it would not match, and DuckDB would refuse to open the warehouse
        self.live.with_name(self.live.name + ".wal").unlink(missing_ok=True)
        directory = os.open(self.live.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        crash_point("after-publish")

    def discard(self) -> None:
        self._folder.close()


def _copy_file(source: Path, target: Path) -> None:
    """Copy in the kernel (a reflink where the file system has them)."""
    with source.open("rb") as src, target.open("wb") as dst:
        remaining = os.fstat(src.fileno()).st_size
        try:
            while remaining > 0:
                copied = os.copy_file_range(src.fileno(), dst.fileno(), remaining)
                if copied == 0:
                    break
                remaining -= copied
        except OSError:
            src.seek(0)
            dst.seek(0)
            dst.truncate()
            shutil.copyfileobj(src, dst, 8 << 20)


@dataclass
class PreparedUpdate:
    """A private copy of the warehouse open for a model update, or (no plan yet) the sign that
    dbt must run. Closing it without `publish` discards the copy."""

    plan: IncrementalPlan | None
    connection: duckdb.DuckDBPyConnection | None
    snapshot: Snapshot | None

    def __enter__(self) -> PreparedUpdate:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _close_connection(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def publish(self) -> None:
        self._close_connection()
        if self.snapshot is not None:
            self.snapshot.publish()

    def close(self) -> None:
        self._close_connection()
        if self.snapshot is not None:
            self.snapshot.discard()
            self.snapshot = None
