"""Turn warehouse values into the text TraceLens' CSVs show (Python reprs of tuples/lists)."""

from __future__ import annotations

import json
from typing import Any


def _as_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    return value


def json_as_tuple_repr(text: str | None) -> str:
    """'[[141,512],[]]' -> '((141, 512), ())', as TraceLens prints argument columns."""
    if not text:
        return ""
    try:
        return repr(_as_tuples(json.loads(text)))
    except ValueError:
        return text


def json_as_list_repr(text: str | None) -> str:
    """'{"B":1}' or '["GEMM"]' -> the Python repr TraceLens shows for dicts and lists."""
    if not text:
        return ""
    try:
        return repr(json.loads(text))
    except ValueError:
        return text
