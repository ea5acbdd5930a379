"""SQL text built in Python: literals for the queries a finding prints, so a reader can paste them.

The one home of SQL quoting (issue 23: one module per concept). Queries that run take their values
as `?` parameters; these helpers are for the SQL shown to people (evidence_sql, the claims ledger).
"""

from __future__ import annotations

from typing import Any


def sql_literal(value: Any) -> str:
    """A SQL string literal holding `value`."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_literal_or_null(value: Any) -> str:
    """sql_literal(value), or `null` for None."""
    return "null" if value is None else sql_literal(value)


def sql_identifier(name: str) -> str:
    """A quoted SQL identifier (a table or column name), `"` doubled."""
    return '"' + name.replace('"', '""') + '"'


def inline_trace_id(sql: str, trace_id: str) -> str:
    """The query with its single `?` replaced by the trace id literal (a finding's evidence_sql)."""
    return sql.replace("?", sql_literal(trace_id), 1).strip()
