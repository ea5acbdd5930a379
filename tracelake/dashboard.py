"""`tracelake dashboard`: the warehouse's runs as one static HTML page (index.html + dashboard.json).

The output folder defaults to `<warehouse>/dashboard`, so each warehouse keeps its own page next to
its data. Only a new, empty or TraceLake-written dashboard folder is replaced (tracelake/folders.py);
the page is written into a staging folder beside it and renamed into place, so an error never leaves
a half-written dashboard and an existing one is replaced whole.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracelake import __version__
from tracelake.core.errors import TraceLakeError, WarehouseError
from tracelake.folders import FolderKind, OutputStaging, claim_output_folder
from tracelake.warehouse import Warehouse

DEFAULT_FOLDER = "dashboard"


def default_dashboard_dir(warehouse: Warehouse) -> Path:
    return warehouse.root / DEFAULT_FOLDER


def _dashboard_folder() -> FolderKind:
    from tracelake.reports.dashboard import DATA_JSON, INDEX  # noqa: PLC0415 - keeps `tracelake --help` light

    return FolderKind(name="dashboard", sign=DATA_JSON, entries=frozenset({INDEX, DATA_JSON}))


def write_dashboard(warehouse: Warehouse, out_dir: Path | None = None) -> Path:
    """Gather the dashboard's data, write the page, and return the path of its index.html."""
    from tracelake.reports.dashboard import INDEX, write_dashboard as write_page  # noqa: PLC0415
    from tracelake.reports.dashboard_data import DashboardRequest, gather_dashboard  # noqa: PLC0415

    warehouse.require_existing()
    if not warehouse.trace_ids():
        raise WarehouseError(f"warehouse {warehouse.root} has no traces; run `tracelake ingest TRACE "
                             f"--warehouse {warehouse.root}` first")
    target = claim_output_folder(
        (out_dir or default_dashboard_dir(warehouse)).resolve(), _dashboard_folder(),
        protected=[*warehouse.reserved_folders(), warehouse.db_path],
        reserved=warehouse.reserved_folders(), force_option=None)
    request = DashboardRequest(warehouse=str(warehouse.root.resolve()), out_dir=target.path,
                               generated_at=datetime.now(UTC), tracelake_version=__version__)
    with warehouse.connect_read_only() as db:
        data = gather_dashboard(db, request)
    if data.trace_count == 0:
        raise WarehouseError(f"warehouse {warehouse.root} has no traces in its models; run "
                             f"`tracelake build --warehouse {warehouse.root}`")
    from tracelake.analysis_record import OutputNote  # noqa: PLC0415

    with OutputNote(warehouse, target.path):  # any later command removes what a kill leaves beside it
        try:
            output = OutputStaging(target)
        except OSError as exc:
            raise TraceLakeError(f"cannot write the dashboard to {target.path} ({exc.strerror}); choose another --out") from None
        with output:
            write_page(data, output.content)
            output.publish()
    return target.path / INDEX
