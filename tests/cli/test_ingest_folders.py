"""`tracelake ingest DIR` over a folder a user keeps their runs in: the traces, TraceLake's own report
and warehouse folders beside them (issue 28, friction 9). The folders TraceLake wrote are not
searched, and the summary counts new, unchanged, skipped and failed files each on their own."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

from tests.conftest import TRACES, run_cli

COMPILED = TRACES / "torch_compile_triton" / "trace.json.gz"
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _summary(stderr: str) -> str:
    """The totals line of an ingest (a note about jobs may follow it)."""
    return next(line for line in stderr.splitlines() if re.match(r"\d+ new, ", line))


def test_ingest_skips_the_folders_tracelake_wrote_and_counts_each_outcome(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(COMPILED, runs / "compiled.json.gz")
    warehouse = runs / "warehouse"  # a lakehouse inside the runs folder (lake.json marks it)
    analyzed = run_cli("analyze", str(runs / "compiled.json.gz"), "--warehouse", str(warehouse), "--quiet")
    assert analyzed.returncode == 0, analyzed.stderr
    report = runs / "compiled_analysis"  # the default output folder, beside the trace
    assert len(list(report.rglob("*.json"))) >= 3  # its JSON files are what ingest walked into
    shutil.copy(BERT, runs / "bert.json.gz")

    ingested = run_cli("ingest", str(runs), "--warehouse", str(warehouse))
    assert ingested.returncode == 0, ingested.stderr
    assert not [line for line in ingested.stderr.splitlines() if line.startswith("skipped")], ingested.stderr
    assert str(report) not in ingested.stderr and str(warehouse) not in ingested.stderr
    assert _summary(ingested.stderr).startswith("1 new, 1 unchanged, 0 skipped, 0 failed in ")

    (runs / "settings.json").write_text('{"learning_rate": 0.1}')  # a file of the user's: not a trace
    (runs / "cut.json.gz").write_bytes(gzip.compress(BERT.read_bytes()[:1000]))  # not gzip of a whole trace
    again = run_cli("ingest", str(runs), "--warehouse", str(warehouse))
    assert again.returncode == 2
    assert _summary(again.stderr).startswith("0 new, 2 unchanged, 1 skipped, 1 failed in "), again.stderr
    assert f"skipped  {runs / 'settings.json'}" in again.stderr


def test_ingest_leaves_out_a_classic_warehouse_inside_the_folder(tmp_path: Path) -> None:
    """A classic-layout warehouse (warehouse.duckdb marks it; it keeps dbt's JSON) inside the runs folder."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(COMPILED, runs / "compiled.json.gz")
    warehouse = runs / "classic"
    made = run_cli("ingest", str(runs / "compiled.json.gz"), "--warehouse", str(warehouse), "--catalog", "classic",
                   "--quiet")
    assert made.returncode == 0, made.stderr
    assert list(warehouse.rglob("*.json"))  # the compiled dbt plan
    again = run_cli("ingest", str(runs), "--warehouse", str(warehouse))
    assert again.returncode == 0, again.stderr
    assert _summary(again.stderr).startswith("0 new, 1 unchanged, 0 skipped, 0 failed in "), again.stderr
