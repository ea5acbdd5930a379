"""The kernels the kernel-fusion analyzer works on, grouped into units, and the trace's ops.

A unit is the set of kernels one fused kernel would take over from one op: the kernels of the
nearest op above their launching op that has a perf model, else of the launching op
(`fusion_kernel_units` mart). Instances are runs of units one fused kernel could replace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from tracelake.analyzers.common import query_rows

MATRIX_KERNEL_TYPES = {"gemm", "conv"}
# Kernels that are already the fused form: never eligible, and a barrier between chains.
FUSED_KERNEL_TYPES = {"attention", "triton_fused", "moe", "collective"}

KernelRow = tuple[int, str, float, float, str]  # (event_idx, name, ts_us, dur_us, kernel_type)

UNIT_KERNELS_SQL = ("select unit_op_id, event_idx, name, ts_us, dur_us, kernel_type, module_call_id "
                    "from fusion_kernel_units where trace_id = ? order by ts_us, event_idx")
OPS_SQL = ("select op_id, name, parent_id, module_chain, pass, flops, bytes, compute_spec, input_dims "
           "from cpu_op_perf_models where trace_id = ?")
MODULES_SQL = ("select module_call_id as module_id, module_class, parent_module_call_id as parent_module_id, depth, "
               "module_chain from module_calls where trace_id = ?")
ANCESTORS_SQL = ("select op_id, ancestor_op_id from cpu_op_ancestors "
                 "where trace_id = ? and op_id in (select unnest(?::bigint[])) order by op_id, distance")


@dataclass
class Unit:
    """The ops whose kernels a fused kernel would replace: one op_perf instance (or launching op)."""

    key: str
    op_id: int | None
    name: str
    module_id: int | None
    kernels: list[KernelRow] = field(default_factory=list)
    flops: float | None = None
    bytes: float | None = None
    compute_spec: str | None = None
    input_dims: str | None = None

    @property
    def ts(self) -> float:
        return self.kernels[0][2]

    @property
    def time_us(self) -> float:
        return sum(k[3] for k in self.kernels)

    @property
    def types(self) -> set[str]:
        return {k[4] for k in self.kernels}

    @property
    def is_matrix(self) -> bool:
        return bool(self.types & MATRIX_KERNEL_TYPES) or (self.compute_spec or "").startswith("matrix")

    @property
    def is_fused(self) -> bool:
        return bool(self.types & FUSED_KERNEL_TYPES)


@dataclass
class Instance:
    source: str
    scope: str
    units: list[Unit]
    module_chain: list[str]


def kernel_count(units: list[Unit]) -> int:
    return sum(len(u.kernels) for u in units)


class OpTable:
    """The trace's cpu ops by op id, held as columns (a dict per op cost more than the query);
    `get` builds one op's row when a candidate needs it."""

    def __init__(self, table: pa.Table) -> None:
        self._columns = {name: table.column(name).to_pylist() for name in table.column_names}
        self._row_of = {op_id: row for row, op_id in enumerate(self._columns["op_id"])}

    def get(self, op_id: int | None) -> dict[str, Any] | None:
        row = self._row_of.get(op_id)
        return None if row is None else {name: values[row] for name, values in self._columns.items()}


def load_units(db: duckdb.DuckDBPyConnection, trace_id: str) -> tuple[list[Unit], OpTable]:
    """The trace's units in launch order (first kernel's start, then key), and its ops."""
    ops = OpTable(db.sql(OPS_SQL, params=[trace_id]).to_arrow_table())
    units: dict[str, Unit] = {}
    for op_id, event_idx, name, ts, dur, kernel_type, module_id in db.execute(UNIT_KERNELS_SQL, [trace_id]).fetchall():
        key = f"op{op_id}" if op_id is not None else f"k{event_idx}"
        unit = units.get(key)
        if unit is None:
            op = ops.get(op_id) or {}
            unit = units[key] = Unit(
                key=key, op_id=op_id, name=op.get("name") or name, module_id=module_id,
                flops=op.get("flops"), bytes=op.get("bytes"), compute_spec=op.get("compute_spec"),
                input_dims=op.get("input_dims"))
        unit.kernels.append((event_idx, name, ts, dur, kernel_type or "unknown"))
    return sorted(units.values(), key=lambda u: (u.ts, u.key)), ops


def load_modules(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[int, dict[str, Any]]:
    """The trace's nn.Module calls by id."""
    return {r["module_id"]: r for r in query_rows(db, MODULES_SQL, [trace_id])}


def load_ancestry(db: duckdb.DuckDBPyConnection, trace_id: str, op_ids: list[int]) -> dict[int, list[int]]:
    """The op ancestry (itself first, nearest next) of each of the given ops."""
    ancestry: dict[int, list[int]] = {}
    for op_id, ancestor_op_id in db.execute(ANCESTORS_SQL, [trace_id, op_ids]).fetchall():
        ancestry.setdefault(op_id, []).append(ancestor_op_id)
    return ancestry


def module_chain(op: dict[str, Any] | None) -> list[str]:
    chain = list((op or {}).get("module_chain") or [])
    return [] if chain == ["root"] else chain
