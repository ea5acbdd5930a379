"""The tables `analyze` records in the warehouse with a report: the ranked findings, the claims
ledger (the GPU events and idle gaps each finding owns) and where the report is. They are dbt
sources (models/staging/_sources.yml, source `analysis`), documented column by column there; this
module and tracelake/analysis_record.py (which stages the rows beside the warehouse as Parquet) are
the one place that creates and writes them. The rows are applied in one transaction, by the run
that staged them or, when it died after its report was in place, by the next command
(`finish_dead_records`). Light to import: every command that opens the warehouse may finish a dead
run's record."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import duckdb

from tracelake.staging import OWNER_FILE, dead_staging

# A connection to the warehouse's private copy, published when the block ends (Warehouse.writing).
Writing = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]

TABLE_COLUMNS = {
    "findings": """
        trace_id varchar, trace2_id varchar, global_rank integer, tier varchar, category varchar,
        agent varchar, finding_id varchar, title varchar, impact_low_percent double,
        impact_mid_percent double, impact_high_percent double, recoverable_ms double,
        claimed_ms double, claimed_gpu_events integer, claimed_idle_gaps integer,
        estimate_method varchar, confidence varchar, evidence_sql varchar, analysis_sql varchar,
        recorded_at timestamptz, ts_start_us double, ts_end_us double, steps bigint[]""",
    "finding_kernels": "trace_id varchar, trace2_id varchar, finding_id varchar, event_idx bigint, claimed_us double",
    "finding_gaps": "trace_id varchar, trace2_id varchar, finding_id varchar, gap_id bigint, claimed_us double",
    "analyses": """
        trace_id varchar, trace2_id varchar, comparison_scope varchar, platform varchar,
        out_dir varchar, analysis_md varchar, finding_count integer, analyzed_at timestamptz,
        platform_source varchar""",
}
ANALYSIS_TABLES = tuple(TABLE_COLUMNS)  # what `tracelake rm` cleans of a removed trace
RECORD_LABEL = "output"  # the pending-area folder of one run's output folder
NOTE_FILE = "output.json"  # where the run stages its output
RECORD_FILE = "record.json"  # written last: the rows are whole and name their report
FINDINGS_COLUMNS = ", ".join(column.split()[0] for column in TABLE_COLUMNS["findings"].split(","))  # inserted by name

# columns added since a table was first created in a user's warehouse (created by an older version)
_ADDED_COLUMNS = {"findings": ("claimed_ms double", "claimed_gpu_events integer", "claimed_idle_gaps integer",
                               "analysis_sql varchar", "ts_start_us double", "ts_end_us double", "steps bigint[]"),
                  "analyses": ("platform_source varchar",)}


def sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def apply_record(con: duckdb.DuckDBPyConnection, folder: Path, record: dict[str, Any]) -> None:
    """Replace the scope's findings and claims with the staged rows, and point `analyses` at the report
    (an output folder holds one report: an older analysis there is gone)."""
    scope = record["scope"]
    for name, columns in TABLE_COLUMNS.items():
        con.execute(f"create table if not exists {name} ({columns})")
    for name, added in _ADDED_COLUMNS.items():
        for column in added:
            con.execute(f"alter table {name} add column if not exists {column}")
    for name in ("findings", "finding_kernels", "finding_gaps"):
        con.execute(f"delete from {name} where trace_id = ? and trace2_id is not distinct from ?", scope)
    con.execute("delete from analyses where (trace_id = ? and trace2_id is not distinct from ?) or analysis_md = ?",
                [*scope, str(Path(record["out_dir"]) / "analysis.md")])
    for name in TABLE_COLUMNS:  # by name: a findings table an older version created has its columns in another order
        con.execute(f"insert into {name} by name select * from read_parquet('{sql_path(folder / f'{name}.parquet')}')")


def _report_landed(record: dict[str, Any]) -> bool:
    try:
        info = (Path(record["out_dir"]) / "analysis.md").stat()
    except OSError:
        return False
    return [info.st_dev, info.st_ino] == record.get("report")


def _remove_dead_output_staging(out_dir: Path) -> None:
    """The staging folders a dead run made for `out_dir` (tracelake/folders.py names them for it)."""
    from tracelake.folders import OUTPUT_LABEL_CHARS  # noqa: PLC0415 - pydantic only once a run died: every command opens the warehouse

    for folder in dead_staging(out_dir.parent, out_dir.name[:OUTPUT_LABEL_CHARS]):
        if (folder / OWNER_FILE).is_file():  # made by TraceLake, whose lock is free: its run is dead
            shutil.rmtree(folder, ignore_errors=True)


def finish_dead_records(pending_dir: Path, writing: Writing) -> None:
    """For each output note of a dead run in the warehouse's `pending_dir` (caller holds the write
    lock): its output staging folders are removed, and its decided record is written (through
    `writing`, the warehouse's private copy) when its report is in place."""
    for folder in dead_staging(pending_dir, RECORD_LABEL):
        try:
            _remove_dead_output_staging(Path(json.loads((folder / NOTE_FILE).read_text())["out_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # killed before its note was whole: it staged no output yet
        try:
            record = json.loads((folder / RECORD_FILE).read_text())
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and _report_landed(record):
            with writing() as con:
                apply_record(con, folder, record)
        shutil.rmtree(folder, ignore_errors=True)
