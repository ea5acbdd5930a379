"""The precision a trace's model runs in: the dtypes of its matrix kernels weighted by GPU time
(kernels.kernel_precision), else the input dtypes of its modelled ops (the dtypes seed)."""

from __future__ import annotations

from collections import defaultdict
from operator import itemgetter

import duckdb

from tracelake.analyzers.model_facts import inline, json_dims, rows
from tracelake.analyzers.model_info import UNKNOWN

_MATRIX_KERNEL_LABEL = {"gemm": "GEMM", "moe": "MoE expert GEMMs", "attention": "attention", "conv": "convolution"}

_MATRIX_PRECISION_SQL = """
select kernel_type, kernel_precision, count(*) as kernels, sum(dur_us) as time_us
from kernels
where trace_id = $trace_id and kernel_type in ('gemm', 'moe', 'attention', 'conv') and kernel_precision is not null
group by all
order by time_us desc
"""

_OP_DTYPE_SQL = """
select input_type, sum(kernel_time_sum_us) as time_us
from op_perf
where trace_id = $trace_id and is_trace_platform and op_category in ('GEMM', 'CONV_fwd', 'CONV_bwd', 'SDPA_fwd', 'SDPA_bwd')
group by 1
order by time_us desc
"""


def _dtype_map(db: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """dtype name (lower case) -> precision, from the dtypes seed when the warehouse has it."""
    has_seed = db.execute("select count(*) from information_schema.tables where table_name = 'dtypes'").fetchone()
    if not (has_seed and has_seed[0]):
        return {}
    return {name.lower(): precision for name, precision in db.execute("select dtype_name, precision from dtypes").fetchall()}


def _by_time_desc(time_by_name: dict[str, float]) -> list[tuple[str, float]]:
    """Most time first, ties in first-seen order (the order Counter.most_common gives)."""
    return sorted(time_by_name.items(), key=itemgetter(1), reverse=True)


def _precision_name(dtype: str | None, dtype_map: dict[str, str]) -> str | None:
    if not dtype:
        return None
    return dtype_map.get(dtype.strip().lower())


def _activation_precision(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str],
                          evidence: list[str]) -> str | None:
    """The precision of the modelled ops' first floating input, the one with the most kernel time."""
    dtype_map = _dtype_map(db)
    op_time: dict[str, float] = defaultdict(float)
    for input_type, time_us in rows(db, _OP_DTYPE_SQL, trace_id):
        types = json_dims(input_type)
        first = next((_precision_name(t, dtype_map) for t in types if _precision_name(t, dtype_map)), None)
        if first and first not in ("int64", "int32"):
            op_time[first] += float(time_us or 0.0)
    if not op_time:
        return None
    sql.append(inline(_OP_DTYPE_SQL, trace_id))
    activation = _by_time_desc(op_time)[0][0]
    evidence.append(f"inputs of the modelled GEMM/attention/convolution ops are {activation.upper()} "
                    f"(by kernel time)")
    return activation


def precision_of(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str], evidence: list[str]) -> str:
    activation = _activation_precision(db, trace_id, sql, evidence)
    matrix_rows = rows(db, _MATRIX_PRECISION_SQL, trace_id)
    if not matrix_rows:
        return activation.upper() if activation else UNKNOWN
    sql.append(inline(_MATRIX_PRECISION_SQL, trace_id))
    total = sum(float(r[3]) for r in matrix_rows) or 1.0
    by_precision: dict[str, float] = defaultdict(float)
    for _, precision, _, time_us in matrix_rows:
        by_precision[precision] += float(time_us)
    parts = []
    for kernel_type, precision, _kernels, time_us in matrix_rows:
        share = 100.0 * float(time_us) / total
        if share >= 1.0:
            parts.append(f"{precision.upper()} {_MATRIX_KERNEL_LABEL.get(kernel_type, kernel_type)} ({share:.0f}%)")
    evidence.append("matrix-kernel time by precision: " + ", ".join(
        f"{p.upper()} {100.0 * t / total:.1f}%" for p, t in _by_time_desc(by_precision) if t / total >= 0.0005))
    top, top_time = _by_time_desc(by_precision)[0]
    if top_time / total >= 0.95:
        result = top.upper()
        if activation and activation != top:
            result += f" matrix kernels; {activation.upper()} op inputs"
        return result
    text = "Mixed: " + ", ".join(parts) + " of matrix-kernel time"
    if activation:
        text += f"; activations {activation.upper()}"
    return text
