"""The lakehouse commands of the CLI: `tracelake files`, `tracelake vacuum`
(tracelake/lake_maintenance.py does the work) and `tracelake migrate` (tracelake/migration.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tracelake.cli_options import CatalogOption, WarehouseOption

if TYPE_CHECKING:
    from tracelake.warehouse import Warehouse

# `vacuum` keeps the snapshots of the last week by default: `sql --at` and `files --at` read them
DEFAULT_KEEP_SNAPSHOTS_SECONDS = 7 * 24 * 3600.0

AtOption = Annotated[int | None, typer.Option("--at", min=0, help=(
    "Read this snapshot of a lakehouse warehouse (its id: `tracelake sql \"select * from "
    "ducklake_snapshots(current_database())\"`)."), show_default=False)]


def register(app: typer.Typer, open_warehouse: Callable[[Path | None, str | None], Warehouse]) -> None:
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

        for path in table_files(open_warehouse(warehouse, None), table, at):
            print(path)

    @app.command(epilog="Example: tracelake vacuum --keep-seconds 0   (only the current snapshot stays)")
    def vacuum(
        keep_seconds: Annotated[float, typer.Option("--keep-seconds", min=0, help=(
            "Keep the snapshots younger than this (default: a week); older ones expire."))] = DEFAULT_KEEP_SNAPSHOTS_SECONDS,
        warehouse: WarehouseOption = None,
    ) -> None:
        """Compact a lakehouse warehouse: rewrite files with deleted rows, merge small files, expire old
        snapshots and delete the files no kept snapshot reads (not while a reader is open)."""
        from tracelake.lake_maintenance import require_lake, vacuum as run_vacuum  # noqa: PLC0415

        wh = require_lake(open_warehouse(warehouse, None), "`tracelake vacuum`")  # a classic one: refused before writing
        wh.prepare_for_writing()
        with wh.write_lock():
            report = run_vacuum(wh, keep_seconds)
        print(f"{report.snapshots_expired} snapshot(s) expired; data files {report.files_before} -> {report.files_after}; "
              f"{report.files_deleted} file(s) deleted")
        if not report.deleted_now:
            print("tracelake: note: a reader is open: the files of expired snapshots stay until the next vacuum",
                  file=sys.stderr)

    @app.command(epilog="Example: tracelake migrate --warehouse ~/old-wh --to ~/wh")
    def migrate(
        to: Annotated[Path, typer.Option("--to", help="A new folder: the lakehouse warehouse to make.")],
        warehouse: WarehouseOption = None,
        catalog: CatalogOption = None,
    ) -> None:
        """Copy a warehouse of the classic layout into a new lakehouse warehouse: every trace with its
        tags, every mart built, in one commit (the classic one is only read; reports are not copied)."""
        from tracelake.lakehouse import LakeWarehouse  # noqa: PLC0415
        from tracelake.migration import migrate as run_migration  # noqa: PLC0415

        if to.exists() and (not to.is_dir() or any(to.iterdir())):
            raise typer.BadParameter(f"{to} exists and is not an empty folder; give a new one", param_hint="--to")
        target = open_warehouse(to, catalog)
        if not isinstance(target, LakeWarehouse):
            raise typer.BadParameter("the new warehouse is a lakehouse: give 'local' or a PostgreSQL URL",
                                     param_hint="--catalog")
        report = run_migration(open_warehouse(warehouse, None), target)
        print(f"migrated {report.traces} trace(s) into the lakehouse warehouse {target.root}")
