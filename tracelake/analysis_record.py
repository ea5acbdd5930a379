"""What `analyze` records in the warehouse for a report (tracelake/analysis_tables.py holds the
tables), landing together with the report or not at all (`ReportRecord`); and the note that lets
any later command remove the output staging folders of a killed run (`OutputNote`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracelake.analysis_tables import (
    FINDINGS_COLUMNS,
    NOTE_FILE,
    RECORD_FILE,
    RECORD_LABEL,
    TABLE_COLUMNS,
    apply_record,
    sql_path,
)
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, PriorityData
from tracelake.staging import StagingFolder, replace_file
from tracelake.warehouse import Warehouse


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
        for name, columns in TABLE_COLUMNS.items():
            con.execute(f"create table {name} ({columns})")
        if rows:
            con.executemany(f"insert into findings ({FINDINGS_COLUMNS}) values ({', '.join('?' * len(rows[0]))})", rows)
        con.register("kernel_claims", kernel_claims)
        con.register("gap_claims", gap_claims)
        con.execute("insert into finding_kernels select * from kernel_claims")
        con.execute("insert into finding_gaps select * from gap_claims")
        con.execute("insert into analyses values (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
            ctx.trace_id, ctx.trace2_id, ctx.comparison_scope, ctx.platform, str(out_dir),
            str(out_dir / "analysis.md"), len(rows), now, ctx.platform_source])
        for name in TABLE_COLUMNS:
            con.execute(f"copy {name} to '{sql_path(folder / f'{name}.parquet')}' (format parquet)")


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
            apply_record(con, self.path, self._record)
        self._published = False
        self.close()

    def close(self) -> None:
        if self._published and self._folder is not None:
            # the report is in place but its rows are not: the folder stays (its lock goes with this
            # process) for the next command to write them
            self._folder = None
            return
        super().close()
