"""Render query results as an aligned text table, CSV or a JSON array of row objects."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from tracelake.core.errors import TraceLakeError

MAX_CELL_CHARS = 60
FULL_DIGITS_FROM = 1e6  # from this magnitude a table shows every integer digit (timestamps, byte counts)


def _json_value(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    return str(value)


def _strict(value: Any) -> Any:
    """`value` with NaN and infinities as None, inside lists and structs too: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value


def _number(value: float) -> str:
    """Six significant digits, except that a large value keeps every integer digit and up to three
    decimals: a timestamp in microseconds reads 1419120000000.125, not 1.41912e+12."""
    if not math.isfinite(value) or abs(value) < FULL_DIGITS_FROM:
        return f"{value:.6g}"
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return _number(value)
    text = json.dumps(_strict(value), default=_json_value) if isinstance(value, (dict, list, tuple)) else str(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _csv_value(value: Any) -> Any:
    """A CSV field: lists and structs as JSON (not Python's repr), NULL as empty."""
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_strict(value), default=_json_value)
    return value


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str) -> str:
    if fmt == "json":
        records = [dict(zip(columns, _strict(list(row)))) for row in rows]
        return json.dumps(records, default=_json_value, indent=1, allow_nan=False)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([[_csv_value(v) for v in row] for row in rows])
        return buffer.getvalue().rstrip("\n")
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)


def write_json_file(path: Path, document: dict) -> None:
    """Written beside the target and renamed over it: no half-written file stays."""
    import gzip  # noqa: PLC0415

    from tracelake.staging import replace_file  # noqa: PLC0415

    data = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, gzip.compress(data) if path.name.endswith(".gz") else data)
    except OSError as exc:
        raise TraceLakeError(f"cannot write {path} ({exc.strerror}); choose a writable --out") from None
