"""Write TraceLens-compatible perf report CSVs (and an .xlsx) for one trace from the marts.

Every number comes from a mart; this module only selects, renames and formats columns so
that files keep TraceLens' names, column names and order. Divergences: docs/divergences.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from tracelake.reports.csv_files import write_csv
from tracelake.reports.formatting import json_as_list_repr, json_as_tuple_repr

TIMELINE_ROWS = (
    "computation_time", "exposed_comm_time", "exposed_memcpy_time", "busy_time",
    "idle_time", "total_time", "total_comm_time", "total_memcpy_time",
)
ARGUMENT_COLUMNS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
STATS = ("mean", "median", "std", "min", "max")
# TraceLens writes two sheets (fwd/bwd) per family except these four (reference §9).
SHEETS = ("GEMM", "SDPA_fwd", "SDPA_bwd", "CONV_fwd", "CONV_bwd", "UnaryElementwise",
          "BinaryElementwise", "Normalization", "Reduce_fwd", "Reduce_bwd")
# TraceLens' inference report writes one sheet only for these; every other family, Normalization
# and the serving families (RMSNorm, InferenceAttention, RoPE, MoE_*) included, gets `<family>_fwd`
# (reference §13.1); a family without rows writes no file.
INFERENCE_SINGLE_SHEETS = ("GEMM", "UnaryElementwise", "BinaryElementwise")


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[object]) -> pa.Table:
    return con.sql(sql, params=params).to_arrow_table()


def _map_column(table: pa.Table, column: str, formatter: Callable[[Any], str]) -> pa.Table:
    """`column` replaced by its values passed through `formatter` (a few hundred rows per sheet)."""
    index = table.schema.get_field_index(column)
    values = pa.array([formatter(value) for value in table.column(column).to_pylist()], pa.string())
    return table.set_column(index, pa.field(column, pa.string()), values)


def _format_arguments(
    table: pa.Table,
    columns: tuple[str, ...] = ARGUMENT_COLUMNS,
    formatter: Callable[[str | None], str] = json_as_tuple_repr,
) -> pa.Table:
    """Argument columns as TraceLens prints them: tuples in the op tables, lists in the sheets."""
    for column in columns:
        if column in table.column_names:
            table = _map_column(table, column, formatter)
    return table


# ---- the sheets' columns: (mart column, TraceLens' name), or a name both share -------------------

Columns = tuple[str | tuple[str, str], ...]
SHARES: Columns = (("percentage", "Percentage (%)"), ("cumulative_percentage", "Cumulative Percentage (%)"))
ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("input_dims", "Input Dims"), ("input_type", "Input type"), ("input_strides", "Input Strides"),
    ("concrete_inputs", "Concrete Inputs"))
OPS_SUMMARY_BY_CATEGORY_COLUMNS: Columns = (
    ("op_category", "op category"), ("op_count", "Count"), "total_direct_kernel_time_ms", *SHARES)
OPS_SUMMARY_COLUMNS: Columns = (
    "name", ("total_direct_kernel_time_us", "total_direct_kernel_time_sum"),
    ("total_subtree_kernel_time_us", "total_subtree_kernel_time_sum"), "total_direct_kernel_time_ms",
    "total_subtree_kernel_time_ms", ("op_count", "Count"), ("op_categories", "Categories"), *SHARES)
OPS_SUMMARY_BY_CATEGORY_AND_MODULE_COLUMNS: Columns = (
    ("op_category", "op category"), "parent_module", ("op_count", "Count"), "call_stack_first",
    "total_direct_kernel_time_ms", *SHARES)
OPS_SUMMARY_BY_MODULE_COLUMNS: Columns = (
    "name", "parent_module", ("total_direct_kernel_time_us", "total_direct_kernel_time_sum"),
    ("total_subtree_kernel_time_us", "total_subtree_kernel_time_sum"),
    ("subtree_kernel_time_count", "total_subtree_kernel_time_count"), "total_direct_kernel_time_ms",
    ("op_count", "Count"), ("op_categories", "Categories"), "call_stack_first", *SHARES)
OPS_UNIQUE_ARGS_COLUMNS: Columns = (
    "name", ("op_category", "op category"), "process_name", "process_label", "thread_name", *ARGUMENTS,
    "num_kernels", "operation_count",
    *((f"{kind}_kernel_time_{s}_us", f"total_{kind}_kernel_time_{s}") for s in (*STATS, "sum")
      for kind in ("direct", "subtree")),
    ("example_op_id", "ex_UID"), "kernel_names", *SHARES)
KERNEL_SUMMARY_COLUMNS: Columns = (
    ("parent_op_category", "Parent op category"), ("parent_cpu_op", "Parent cpu_op"), ("kernel_name", "Kernel name"),
    ("stream", "Kernel stream"), ("kernel_duration_sum_us", "Kernel duration (µs)_sum"),
    ("kernel_count", "Kernel duration (µs)_count"), ("kernel_duration_mean_us", "Kernel duration (µs)_mean"),
    ("kernel_duration_min_us", "Kernel duration (µs)_min"), ("kernel_duration_max_us", "Kernel duration (µs)_max"),
    ("percent_of_kernel_time", "Percent of kernels time (%)"), ("percent_of_total_time", "Percent of total time (%)"))


def _roofline_columns(prefix_first: bool) -> Columns:
    first = "_first" if prefix_first else ""
    stats = tuple((column, name) for s in STATS for column, name in (
        (f"tb_per_s_{s}", f"TB/s_{s}"), (f"tflops_per_s_{s}", f"TFLOPS/s_{s}"), (f"pct_roofline_{s}", f"Pct Roofline_{s}"),
        (f"kernel_time_{s}_us", f"Kernel Time (µs)_{s}")))
    return (("gflops", f"GFLOPS{first}"), ("data_moved_mib", f"Data Moved (MB){first}"),
            ("flops_per_byte", f"FLOPS/Byte{first}"), ("compute_spec", "Compute Spec"),
            ("roofline_time_us", "Roofline Time (µs)_first"), ("roofline_bound", f"Roofline Bound{first}"), *stats,
            ("kernel_time_sum_us", "Kernel Time (µs)_sum"))


ROOFLINE_SHEET_COLUMNS: Columns = (
    "sheet", "name", "perf_params", ("num_kernels::integer", "num_kernels"), *_roofline_columns(True),
    ("process_name", "process_name_first"), ("process_label", "process_label_first"),
    ("thread_name", "thread_name_first"), *((column, f"{name}_first") for column, name in ARGUMENTS),
    ("operation_count", "name_count"), ("example_op_id", "UID_first"))


def _select_list(columns: Columns) -> str:
    return ", ".join(c if isinstance(c, str) else f'{c[0]} as "{c[1]}"' for c in columns)


def _read_sheet(con: duckdb.DuckDBPyConnection, mart: str, columns: Columns, order_by: str,
                params: list[object]) -> pa.Table:
    """A mart's rows of one trace (and platform, with a second parameter), renamed and in order."""
    where = " and ".join(f"{key} = ?" for key in ("trace_id", "platform")[:len(params)])
    return _frame(con, f"select {_select_list(columns)} from {mart} where {where} order by {order_by}", params)


def _list_repr(values: list[str] | None) -> str:
    return repr(list(values or []))


TIMELINE_SCHEMA = pa.schema([("type", pa.string()), ("time ms", pa.float64()), ("percent", pa.float64())])


def gpu_timeline(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    rows = con.execute(
        "select " + ", ".join(f"{n}_ms, {n}_percent" for n in TIMELINE_ROWS) + " from gpu_timeline where trace_id = ?",
        [trace_id],
    ).fetchall()
    row = rows[0] if rows else None
    if row is None:
        return TIMELINE_SCHEMA.empty_table()
    return pa.table([list(TIMELINE_ROWS), list(row[0::2]), list(row[1::2])], schema=TIMELINE_SCHEMA)


def ops_summary_by_category(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    return _read_sheet(con, "ops_summary_by_category", OPS_SUMMARY_BY_CATEGORY_COLUMNS,
                       "total_direct_kernel_time_ms desc, op_category", [trace_id])


def ops_summary(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    frame = _read_sheet(con, "ops_summary", OPS_SUMMARY_COLUMNS, "total_direct_kernel_time_us desc, name", [trace_id])
    return _map_column(frame, "Categories", _list_repr)


def ops_summary_by_category_and_module(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    """The inference-mode ops_summary_by_category: one row per op category and parent module."""
    frame = _read_sheet(con, "ops_summary_by_category_and_module", OPS_SUMMARY_BY_CATEGORY_AND_MODULE_COLUMNS,
                        "total_direct_kernel_time_ms desc, op_category, parent_module", [trace_id])
    return _map_column(frame, "call_stack_first", _list_repr)


def ops_summary_by_module(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    """The inference-mode ops_summary: one row per op name and parent module."""
    frame = _read_sheet(con, "ops_summary_by_module", OPS_SUMMARY_BY_MODULE_COLUMNS,
                        "total_direct_kernel_time_us desc, name, parent_module", [trace_id])
    return _map_column(_map_column(frame, "Categories", _list_repr), "call_stack_first", _list_repr)


def ops_unique_args(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    frame = _read_sheet(con, "ops_unique_args", OPS_UNIQUE_ARGS_COLUMNS, "direct_kernel_time_sum_us desc, example_op_id",
                        [trace_id])
    return _format_arguments(_map_column(frame, "kernel_names", _list_repr))


def unified_perf_summary(con: duckdb.DuckDBPyConnection, trace_id: str, platform: str) -> pa.Table:
    frame = _frame(con, f"""
        select name, op_category as "op category", process_name, process_label, thread_name,
               input_dims as "Input Dims", input_type as "Input type", input_strides as "Input Strides",
               concrete_inputs as "Concrete Inputs", example_op_id as "ex_UID", operation_count,
               total_duration_us, mean_duration_us, std_duration_us, {_select_list(_roofline_columns(False))},
               perf_params, has_perf_model, module_chain,
               100.0 * kernel_time_sum_us / sum(kernel_time_sum_us) over () as "Percentage (%)",
               100.0 * sum(kernel_time_sum_us) over (order by kernel_time_sum_us desc, example_op_id
                   rows between unbounded preceding and current row) / sum(kernel_time_sum_us) over ()
                   as "Cumulative Percentage (%)"
        from op_perf where trace_id = ? and platform = ?
        order by kernel_time_sum_us desc, example_op_id
    """, [trace_id, platform])
    frame = _map_column(frame, "perf_params", json_as_list_repr)
    frame = _map_column(frame, "module_chain", lambda chain: " > ".join(chain) if chain is not None else "")
    return _format_arguments(frame)


def _inference_sheet(sheet: str) -> str:
    if sheet in INFERENCE_SINGLE_SHEETS or sheet.endswith(("_fwd", "_bwd")):
        return sheet
    return f"{sheet}_fwd"


def roofline_sheets(
    con: duckdb.DuckDBPyConnection, trace_id: str, platform: str, inference: bool = False,
) -> dict[str, pa.Table]:
    """The per-category roofline sheets (GEMM, SDPA_fwd, ...), from one query. `inference`: the
    sheets of TraceLens' inference report, every family roofline_ops has, split as it splits them."""
    frame = _read_sheet(con, "roofline_summary", ROOFLINE_SHEET_COLUMNS, "kernel_time_sum_us desc, example_op_id",
                        [trace_id, platform])
    frame = _map_column(frame, "perf_params", json_as_list_repr)
    frame = _format_arguments(frame, tuple(f"{c}_first" for c in ARGUMENT_COLUMNS), json_as_list_repr)
    names = SHEETS
    if inference:
        frame = _map_column(frame, "sheet", _inference_sheet)
        names = tuple(sorted(set(frame.column("sheet").to_pylist())))
    sheets = {sheet: frame.filter(pc.equal(frame.column("sheet"), sheet)).drop_columns(["sheet"]) for sheet in names}
    return {sheet: table for sheet, table in sheets.items() if table.num_rows > 0}


def kernel_summary(con: duckdb.DuckDBPyConnection, trace_id: str) -> pa.Table:
    return _read_sheet(con, "kernel_summary", KERNEL_SUMMARY_COLUMNS, "kernel_duration_sum_us desc, kernel_name",
                       [trace_id])


def perf_report_tables(
    con: duckdb.DuckDBPyConnection, trace_id: str, platform: str, inference: bool = False,
) -> dict[str, pa.Table]:
    """Every sheet of the report, named as TraceLens names its CSVs; empty sheets left out.
    `inference`: the layout of TraceLens' inference report (its `--group_by_parent_module` op
    summaries and its sheet split), else the default report's."""
    builders: dict[str, Callable[[], pa.Table]] = {
        "gpu_timeline": lambda: gpu_timeline(con, trace_id),
        "ops_summary_by_category": (lambda: ops_summary_by_category_and_module(con, trace_id)) if inference
        else (lambda: ops_summary_by_category(con, trace_id)),
        "ops_summary": (lambda: ops_summary_by_module(con, trace_id)) if inference else (lambda: ops_summary(con, trace_id)),
        "ops_unique_args": lambda: ops_unique_args(con, trace_id),
        "unified_perf_summary": lambda: unified_perf_summary(con, trace_id, platform),
        "kernel_summary": lambda: kernel_summary(con, trace_id),
    }
    tables = {name: build() for name, build in builders.items()}
    tables.update(roofline_sheets(con, trace_id, platform, inference))
    return {name: frame for name, frame in tables.items() if frame.num_rows > 0}


def write_perf_report(tables: dict[str, pa.Table], csv_dir: Path, xlsx_path: Path | None = None) -> None:
    """Write the CSVs (and optionally one workbook) atomically: a half-written report never
    replaces a complete one."""
    csv_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{csv_dir.name}-", dir=csv_dir.parent))
    try:
        for name, frame in tables.items():
            write_csv(frame, staging / f"{name}.csv")
        if csv_dir.exists():
            shutil.rmtree(csv_dir)
        os.replace(staging, csv_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if xlsx_path is not None:
        temporary = xlsx_path.with_name(f".{xlsx_path.name}.partial")
        import polars as pl  # noqa: PLC0415 - only with --xlsx: ~26 MB and 0.1 s of start-up otherwise
        import xlsxwriter  # noqa: PLC0415

        with xlsxwriter.Workbook(str(temporary)) as workbook:
            for name, frame in tables.items():
                sheet = cast("pl.DataFrame", pl.from_arrow(frame))  # a table in, a frame out
                sheet.write_excel(workbook=workbook, worksheet=name[:31])
        os.replace(temporary, xlsx_path)
