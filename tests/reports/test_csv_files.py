"""The pipeline's one CSV writer writes what pandas (and so TraceLens) would."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa

from tracelake.reports.csv_files import write_csv


def test_values_are_quoted_only_when_needed_and_read_back_unchanged(tmp_path: Path) -> None:
    table = pa.table({
        "name": ["aten::mm", "a, b", 'say "hi"'],
        "time ms": [5.0, 1e-7, None],
        "count": [1, None, 3],
        "modelled": [True, False, None],
    })
    path = tmp_path / "ops.csv"
    write_csv(table, path)
    lines = path.read_text().splitlines()
    assert lines[0] == "name,time ms,count,modelled"
    assert lines[1] == "aten::mm,5.0,1,True"  # nothing quoted that needs no quotes; floats as Python prints them
    assert lines[2] == '"a, b",1e-07,,False'
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["name"] for row in rows] == ["aten::mm", "a, b", 'say "hi"']
    assert [float(row["time ms"]) if row["time ms"] else None for row in rows] == [5.0, 1e-7, None]


def test_an_empty_table_writes_its_header(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    write_csv(pa.schema([("type", pa.string()), ("time ms", pa.float64())]).empty_table(), path)
    assert path.read_text() == "type,time ms\n"
