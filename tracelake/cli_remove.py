"""`tracelake rm`: remove the traces selectors name; with --dry-run, list them as `tracelake traces`
does (name, device, run tags, size), changing nothing."""

from __future__ import annotations

from tracelake.core.sql_text import sql_literal
from tracelake.output import render
from tracelake.warehouse import Warehouse

# what `rm --dry-run` shows of each trace: `tracelake traces`' columns that tell one run from another
DRY_RUN_COLUMNS = ("trace_id, file_name, device_name, tags, round(file_size_bytes / 1e6, 2) as file_mb, event_count, "
                   "ingested_at")


def remove_command(wh: Warehouse, selectors: list[str], dry_run: bool) -> None:
    from tracelake.selectors import resolve_traces  # noqa: PLC0415 - as the command line's other imports

    wh.require_existing()
    trace_ids = list(dict.fromkeys(t for selector in selectors for t in resolve_traces(wh, selector, ingest_new=False)))
    if dry_run:
        print(dry_run_listing(wh, trace_ids))
        return
    wh.prepare_for_writing()
    with wh.write_lock():
        wh.remove_traces(trace_ids)
    for trace_id in trace_ids:
        print(f"removed {trace_id}")


def dry_run_listing(wh: Warehouse, trace_ids: list[str]) -> str:
    """The traces `rm` would remove, in the order the selectors named them, as a table."""
    from tracelake.query import run_query  # noqa: PLC0415 - DuckDB, imported by the commands that use it

    ids = ", ".join(sql_literal(trace_id) for trace_id in trace_ids)
    columns, rows = run_query(wh, f"select {DRY_RUN_COLUMNS} from traces where trace_id in ({ids})", 0)
    named_order = {trace_id: position for position, trace_id in enumerate(trace_ids)}
    rows = sorted(rows, key=lambda row: named_order[row[0]])
    total_mb = sum(row[columns.index("file_mb")] or 0 for row in rows)
    return (f"would remove {len(rows)} trace{'s' if len(rows) != 1 else ''} ({total_mb:.2f} MB of trace files); "
            f"nothing was changed:\n" + render(columns, rows, "table"))
