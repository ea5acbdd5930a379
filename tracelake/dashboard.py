"""`tracelake dashboard`: the warehouse's runs as one static HTML page (index.html + dashboard.json).

The output folder defaults to `<warehouse>/dashboard`, so each warehouse keeps its own page next to
its data. The page is written into a temporary folder beside the output folder and renamed into
place, so an error never leaves a half-written dashboard and an existing one is replaced whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from ingest.errors import TraceLakeError, WarehouseError
from tracelake import __version__
from tracelake.folders import swap_into_place
from tracelake.warehouse import Warehouse

DEFAULT_FOLDER = "dashboard"


def default_dashboard_dir(warehouse: Warehouse) -> Path:
    return warehouse.root / DEFAULT_FOLDER


def _check_out_dir(out_dir: Path, warehouse: Warehouse) -> None:
    from reports.dashboard import DATA_JSON  # noqa: PLC0415 - keeps `tracelake --help` light

    if warehouse.root.resolve().is_relative_to(out_dir):
        raise WarehouseError(f"the warehouse {warehouse.root} is inside the dashboard folder {out_dir}, which "
                             "the dashboard replaces; choose another --out")
    if out_dir.exists() and not out_dir.is_dir():
        raise TraceLakeError(f"{out_dir} is a file; choose a folder for --out")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / DATA_JSON).is_file():
        raise TraceLakeError(f"{out_dir} already holds files that are not a dashboard, and the dashboard "
                             "replaces its folder; choose an empty or new folder for --out")


def write_dashboard(warehouse: Warehouse, out_dir: Path | None = None) -> Path:
    """Gather the dashboard's data, write the page, and return the path of its index.html."""
    from reports.dashboard import INDEX, write_dashboard as write_page  # noqa: PLC0415
    from reports.dashboard_data import DashboardRequest, gather_dashboard  # noqa: PLC0415

    warehouse.require_existing()
    if not warehouse.trace_ids():
        raise WarehouseError(f"warehouse {warehouse.root} has no traces; run `tracelake ingest TRACE "
                             f"--warehouse {warehouse.root}` first")
    target = (out_dir or default_dashboard_dir(warehouse)).resolve()
    _check_out_dir(target, warehouse)
    request = DashboardRequest(warehouse=str(warehouse.root.resolve()), out_dir=target,
                               generated_at=datetime.now(timezone.utc), tracelake_version=__version__)
    with warehouse.connect_read_only() as db:
        data = gather_dashboard(db, request)
    if data.trace_count == 0:
        raise WarehouseError(f"warehouse {warehouse.root} has no traces in its models; run "
                             f"`tracelake build --warehouse {warehouse.root}`")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    except OSError as exc:
        raise TraceLakeError(f"cannot write the dashboard to {target} ({exc.strerror}); choose another --out") from None
    try:
        write_page(data, staging)
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; give it the mode any new folder gets
        swap_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target / INDEX
