"""What `analyze` records in the warehouse with a report: the ranked findings, the claims ledger
(the GPU events and idle gaps each finding owns) and where the report is, landing together with the
report or not at all (`ReportRecord`); and the note that lets any later command remove the output
staging folders of a killed run (`OutputNote`). The
tables are dbt sources (models/staging/_sources.yml, source `analysis`), documented column by
column there; this module is the one place that creates and writes them."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracelake.analyzers.contracts import AgentResult, AnalysisContext, PriorityData
from tracelake.folders import OUTPUT_LABEL_CHARS
from tracelake.staging import OWNER_FILE, StagingFolder, dead_staging, replace_file
from tracelake.warehouse import Warehouse

_TABLES = {
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
        out_dir varchar, analysis_md varchar, finding_count integer, analyzed_at timestamptz""",
}
ANALYSIS_TABLES = tuple(_TABLES)  # what `tracelake rm` cleans of a removed trace
RECORD_LABEL = "output"  # the pending-area folder of one run's output folder
NOTE_FILE = "output.json"  # where the run stages its output
RECORD_FILE = "record.json"  # written last: the rows are whole and name their report
FINDINGS_COLUMNS = ", ".join(column.split()[0] for column in _TABLES["findings"].split(","))  # inserted by name

# columns added since a table was first created in a user's warehouse (created by an older version)
_ADDED_COLUMNS = {"findings": ("claimed_ms double", "claimed_gpu_events integer", "claimed_idle_gaps integer",
                               "analysis_sql varchar", "ts_start_us double", "ts_end_us double", "steps bigint[]")}


def _claims(results: list[AgentResult], ctx: AnalysisContext, ranked: set[str]) -> tuple[pa.Table, pa.Table]:
    owned = [f for r in results for f in r.findings if f.finding_id in ranked]
    kernels = [(f.finding_id, idx, us) for f in owned for idx, us in f.claimed_kernels.items()]
    gaps = [(f.finding_id, gap, us) for f in owned for gap, us in f.claimed_gaps.items()]

    def table(rows: list[tuple[str, int, float]], id_column: str) -> pa.Table:
        return pa.table({
            "trace_id": pa.array([ctx.trace_id] * len(rows), pa.string()),
            "trace2_id": pa.array([ctx.trace2_id] * len(rows), pa.string()),
            "finding_id": pa.array([r[0] for r in rows], pa.string()),
            id_column: pa.array([r[1] for r in rows], pa.int64()),
            "claimed_us": pa.array([r[2] for r in rows], pa.float64()),
        })
    return table(kernels, "event_idx"), table(gaps, "gap_id")


def _staged_rows(folder: Path, ctx: AnalysisContext, priority: PriorityData, results: list[AgentResult],
                 out_dir: Path) -> None:
    """Write the analysis's rows into `folder`, one Parquet file per table, as the tables type them."""
    now = datetime.now(UTC)
    rows = [(ctx.trace_id, ctx.trace2_id, f.global_rank, f.tier, f.category, f.agent, f.finding_id, f.title,
             f.impact_low, f.impact_score, f.impact_high, f.recoverable_ms, f.claimed_time_ms,
             f.claimed_kernel_count, f.claimed_gap_count, f.estimate_method, f.confidence, f.evidence_sql,
             f.analysis_sql, now, f.ts_start_us, f.ts_end_us, f.steps) for f in priority.findings]
    kernel_claims, gap_claims = _claims(results, ctx, {f.finding_id for f in priority.findings})
    with duckdb.connect() as con:
        for name, columns in _TABLES.items():
            con.execute(f"create table {name} ({columns})")
        if rows:
            con.executemany(f"insert into findings ({FINDINGS_COLUMNS}) values ({', '.join('?' * len(rows[0]))})", rows)
        con.register("kernel_claims", kernel_claims)
        con.register("gap_claims", gap_claims)
        con.execute("insert into finding_kernels select * from kernel_claims")
        con.execute("insert into finding_gaps select * from gap_claims")
        con.execute("insert into analyses values (?, ?, ?, ?, ?, ?, ?, ?)", [
            ctx.trace_id, ctx.trace2_id, ctx.comparison_scope, ctx.platform, str(out_dir),
            str(out_dir / "analysis.md"), len(rows), now])
        for name in _TABLES:
            con.execute(f"copy {name} to '{_sql_path(folder / f'{name}.parquet')}' (format parquet)")


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _apply(con: duckdb.DuckDBPyConnection, folder: Path, record: dict[str, Any]) -> None:
    """Replace the scope's findings and claims with the staged rows, and point `analyses` at the report
    (an output folder holds one report: an older analysis there is gone)."""
    scope = record["scope"]
    for name, columns in _TABLES.items():
        con.execute(f"create table if not exists {name} ({columns})")
    for name, added in _ADDED_COLUMNS.items():
        for column in added:
            con.execute(f"alter table {name} add column if not exists {column}")
    for name in ("findings", "finding_kernels", "finding_gaps"):
        con.execute(f"delete from {name} where trace_id = ? and trace2_id is not distinct from ?", scope)
    con.execute("delete from analyses where (trace_id = ? and trace2_id is not distinct from ?) or analysis_md = ?",
                [*scope, str(Path(record["out_dir"]) / "analysis.md")])
    for name in _TABLES:  # by name: a findings table an older version created has its columns in another order
        con.execute(f"insert into {name} by name select * from read_parquet('{_sql_path(folder / f'{name}.parquet')}')")


class OutputNote:
    """Tells the warehouse where a run stages an output folder (beside it, tracelake/folders.py): made
    before that staging folder, it lives in the warehouse's pending area and is locked while the run
    lives. A command that finds a dead one removes the dead staging folders of that output (those
    only: named for it, with an owner file whose lock is free), wherever it was to go; `close`
    removes the note."""

    def __init__(self, warehouse: Warehouse, out_dir: Path, required: bool = False) -> None:
        """`required`: raise when the warehouse cannot take the note (else, in a warehouse this user
        may only read, the output is written without one)."""
        self._folder: StagingFolder | None = None
        self.path = warehouse.pending_dir
        try:
            self._folder = StagingFolder(warehouse.pending_dir, RECORD_LABEL, clean=False)
            self.path = self._folder.path
            replace_file(self.path / NOTE_FILE, json.dumps({"out_dir": str(out_dir)}).encode())
        except OSError:
            if required:
                raise
            self.close()

    def __enter__(self) -> OutputNote:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._folder is not None:
            self._folder.close()
            self._folder = None


class ReportRecord(OutputNote):
    """What `analyze` records in the warehouse for a report, landing with the report or not at all:
    the rows are staged (`stage`) and the record decided (`decide`, which names the report file it
    belongs to) before the report is moved into place; `commit` then writes them. A run killed in
    between leaves a decided record, which the next command writes if that report is in place and
    drops otherwise (`finish_dead_records`)."""

    def __init__(self, warehouse: Warehouse, out_dir: Path) -> None:
        warehouse.prepare_for_writing()
        super().__init__(warehouse, out_dir, required=True)
        self.warehouse = warehouse
        self._record: dict[str, Any] | None = None
        self._published = False

    def stage(self, ctx: AnalysisContext, priority: PriorityData, results: list[AgentResult], out_dir: Path) -> None:
        _staged_rows(self.path, ctx, priority, results, out_dir)
        self._record = {"scope": [ctx.trace_id, ctx.trace2_id], "out_dir": str(out_dir)}

    def decide(self, report_md: Path) -> None:
        """The rows are whole; they belong to the report whose analysis.md is `report_md` (staged)."""
        if self._record is None:
            return
        info = report_md.stat()
        self._record["report"] = [info.st_dev, info.st_ino]  # a rename into place keeps both
        replace_file(self.path / RECORD_FILE, json.dumps(self._record).encode())

    def commit(self) -> None:
        """Write the rows (the report is in place)."""
        if self._record is None:
            return
        self._published = True  # from here on, a failure leaves the rows for the next command
        with self.warehouse.write_lock(), self.warehouse.writing() as con:
            _apply(con, self.path, self._record)
        self._published = False
        self.close()

    def close(self) -> None:
        if self._published and self._folder is not None:
            # the report is in place but its rows are not: the folder stays (its lock goes with this
            # process) for the next command to write them
            self._folder = None
            return
        super().close()


def _report_landed(record: dict[str, Any]) -> bool:
    try:
        info = (Path(record["out_dir"]) / "analysis.md").stat()
    except OSError:
        return False
    return [info.st_dev, info.st_ino] == record.get("report")


def _remove_dead_output_staging(out_dir: Path) -> None:
    """The staging folders a dead run made for `out_dir` (tracelake/folders.py names them for it)."""
    for folder in dead_staging(out_dir.parent, out_dir.name[:OUTPUT_LABEL_CHARS]):
        if (folder / OWNER_FILE).is_file():  # made by TraceLake, whose lock is free: its run is dead
            shutil.rmtree(folder, ignore_errors=True)


def finish_dead_records(warehouse: Warehouse) -> None:
    """For each output note of a dead run (caller holds the write lock): its output staging folders
    are removed, and its decided record is written when its report is in place."""
    for folder in dead_staging(warehouse.pending_dir, RECORD_LABEL):
        try:
            _remove_dead_output_staging(Path(json.loads((folder / NOTE_FILE).read_text())["out_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # killed before its note was whole: it staged no output yet
        try:
            record = json.loads((folder / RECORD_FILE).read_text())
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and _report_landed(record):
            with warehouse.writing() as con:
                _apply(con, folder, record)
        shutil.rmtree(folder, ignore_errors=True)
