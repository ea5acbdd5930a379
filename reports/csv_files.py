"""CSV files the pipeline writes: one writer, so every CSV formats values the same way.

Values are written as pandas (and so TraceLens) writes them: quoted only when they hold a comma,
quote or newline, nulls empty, booleans `True` / `False`, floats as Python prints them (`5.0`,
`1e-07`). Arrow's own writer quotes every string and prints floats differently (`5`, `1e-7`).
"""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow as pa


def write_csv(table: pa.Table, path: Path) -> None:
    columns = [column.to_pylist() for column in table.columns]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(table.column_names)
        writer.writerows(zip(*columns))
