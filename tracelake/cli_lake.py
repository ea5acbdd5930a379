"""The lakehouse commands of the CLI: `tracelake files` and `tracelake vacuum`
(tracelake/lake_maintenance.py does the work)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli_options import WarehouseOption

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse

# `vacuum` keeps the snapshots of the last week by default: `sql --at` and `files --at` read them
DEFAULT_KEEP_SNAPSHOTS_SECONDS = 7 * 24 * 3600.0

AtOption = Annotated[int | None, typer.Option("--at", min=0, help=(
    "Read this snapshot of a lakehouse warehouse (its id: `tracelake sql \"select * from "
    "ducklake_snapshots(current_database())\"`)."), show_default=False)]


def register(app: typer.Typer, open_warehouse: Callable[[Path | None], Warehouse]) -> None:
    @app.command(epilog="Example: python -c \"import pyarrow.parquet as pq; print(pq.read_table("
                        "open('kernels.txt').read().split()))\"  after  tracelake files kernels > kernels.txt")
    def files(
        table: Annotated[str, typer.Argument(help="A table of the warehouse: kernels, raw.events, ...")],
        at: AtOption = None,
        warehouse: WarehouseOption = None,
    ) -> None:
        """Print the Parquet files that hold a lakehouse table's rows (at a snapshot), one path a line,
        for Spark, Polars, pyarrow or Trino to read exactly what DuckDB reads."""
        from tracelake.lake_maintenance import table_files  # noqa: PLC0415 - the CLI imports late

        for path in table_files(open_warehouse(warehouse), table, at):
            print(path)

    @app.command(epilog="Example: tracelake vacuum --keep-seconds 0   (only the current snapshot stays)")
    def vacuum(
        keep_seconds: Annotated[float, typer.Option("--keep-seconds", min=0, help=(
            "Keep the snapshots younger than this (default: a week); older ones expire."))] = DEFAULT_KEEP_SNAPSHOTS_SECONDS,
        warehouse: WarehouseOption = None,
    ) -> None:
        """Compact a lakehouse warehouse: rewrite files with deleted rows, merge small files, expire old
        snapshots and delete the files no kept snapshot reads (not while a reader is open)."""
        from tracelake.lake_maintenance import vacuum as run_vacuum  # noqa: PLC0415

        wh = open_warehouse(warehouse)
        wh.require_existing()
        wh.prepare_for_writing()
        with wh.write_lock():
            report = run_vacuum(wh, keep_seconds)
        print(f"{report.snapshots_expired} snapshot(s) expired; data files {report.files_before} -> {report.files_after}; "
              f"{report.files_deleted} file(s) deleted")
        if not report.deleted_now:
            print("tracelake: note: a reader is open: the files of expired snapshots stay until the next vacuum",
                  file=sys.stderr)
