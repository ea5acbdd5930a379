"""The facts model identification reads from the warehouse: module classes and the outermost module
calls, weight operands, attention shapes, op and kernel mix. Each query that shows something is kept
(trace id inlined) as the evidence SQL of the identification."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import duckdb

from tracelake.core.sql_text import sql_literal

# A repeated layer: decoder/encoder layers and blocks, not their sub-modules or containers.
# diffusers names its blocks by dimension: `UpDecoderBlock2D`, `ResnetBlock2D`.
_LAYER_CLASS = re.compile(r"(DecoderLayer|EncoderLayer|Layer|Block|Bottleneck|BasicBlock)(\d+D)?$")
_NOT_A_LAYER = re.compile(r"(?i)(mlp|attention|attn|feedforward|ffn|norm|embedding|^sequential$|^modulelist$|^linear$)")
_MODULE_INSTANCES_SQL = """
select module_class, count(distinct module_instance) as instances, count(*) as calls
from module_calls
where trace_id = $trace_id
group by 1
order by 1
"""

_MODULE_CHAIN_SQL = """
select module_class, count(*) as calls
from (select unnest(module_chain) as module_class from cpu_ops where trace_id = $trace_id)
where module_class <> 'root'
group by 1
order by 1
"""

# The outermost model calls (model_root_calls: under wrappers only) by class, and their sub-module classes.
_ROOT_MODULES_SQL = """
select module_class, min(depth) as depth, count(*) as calls, sum(kernel_time_us) as kernel_time_us
from model_root_calls
where trace_id = $trace_id
group by module_class
order by kernel_time_us desc, min(ts_us)
"""

_ROOT_DESCENDANTS_SQL = """
select root_classes.module_class as root_class, calls.module_class, count(distinct calls.module_instance) as instances
from (select distinct trace_id, module_class, depth from model_root_calls where trace_id = $trace_id) as root_classes
join module_calls as calls
  on calls.trace_id = root_classes.trace_id and calls.depth > root_classes.depth
 and calls.module_chain[root_classes.depth + 1] = root_classes.module_class
group by all
order by 1, 2
"""

# Weight operands, one row per op call, with the module instance of the innermost nn.Module call
# around the call.
_WEIGHT_OPS_SQL = """
select cpu_ops.op_id, cpu_ops.name as op_name, cpu_ops.input_dims, module_calls.module_instance,
       module_calls.module_chain
from cpu_ops
left join module_call_events
  on module_call_events.trace_id = cpu_ops.trace_id and module_call_events.event_idx = cpu_ops.op_id
left join module_calls
  on module_calls.trace_id = module_call_events.trace_id
 and module_calls.module_call_id = module_call_events.module_call_id
where cpu_ops.trace_id = $trace_id
  and cpu_ops.name in ('aten::linear', 'aten::convolution', 'aten::embedding', 'aten::embedding_bag')
order by cpu_ops.op_id
"""

_GEMM_SHAPES_SQL = """
select perf_params, operation_count
from op_perf
where trace_id = $trace_id and is_trace_platform and op_category = 'GEMM' and name in ('aten::mm', 'aten::addmm')
  and perf_params is not null
order by kernel_time_sum_us desc
"""

_ATTENTION_SQL = """
select name, op_category, perf_params, input_dims, kernel_time_sum_us
from op_perf
where trace_id = $trace_id and is_trace_platform and (op_category like 'SDPA%' or op_category = 'InferenceAttention')
order by kernel_time_sum_us desc
"""

_KERNEL_MIX_SQL = """
select kernel_type, count(*) as kernels, sum(dur_us) as time_us,
       bool_or(regexp_matches(lower(name), 'rms_?norm|rsqrt')) as rms_norm,
       bool_or(regexp_matches(lower(name), 'layer_?norm')) as layer_norm,
       bool_or(regexp_matches(lower(name), 'batch_?norm')) as batch_norm,
       bool_or(regexp_matches(lower(name), 'silu|swiglu')) as silu,
       bool_or(regexp_matches(lower(name), 'gelu')) as gelu,
       bool_or(regexp_matches(lower(name), 'rotary|rope')) as rotary,
       bool_or(regexp_matches(name, '^triton_')) as triton
from kernels
where trace_id = $trace_id
group by 1
order by time_us desc
"""

KERNEL_FLAGS = ("rms_norm", "layer_norm", "batch_norm", "silu", "gelu", "rotary")
OP_KINDS = ("cpu_ops", "conv_ops", "attention_ops", "bmm_ops", "softmax_ops", "rnn_ops", "sparse_embedding_ops",
            "moe_ops", "compiled_regions")


def inline(sql: str, trace_id: str) -> str:
    """The query with the trace id written in, so a reader can paste it into `tracelake sql`."""
    return " ".join(sql.replace("$trace_id", sql_literal(trace_id)).split())


def rows(db: duckdb.DuckDBPyConnection, sql: str, trace_id: str) -> list[tuple]:
    return db.execute(sql, {"trace_id": trace_id}).fetchall()


def json_dims(text: str | None) -> list:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def layer_class(instances: dict[str, int]) -> tuple[str, int] | None:
    """The repeated layer among module classes (class -> distinct instances): (class, instances)."""
    candidates = [(n, c) for c, n in instances.items()
                  if n >= 2 and _LAYER_CLASS.search(c) and not _NOT_A_LAYER.search(c)]
    if not candidates:
        return None
    count, module_class = max(candidates)
    return module_class, count


@dataclass
class Weight:
    kind: Literal["linear", "conv", "embedding"]
    shape: tuple[int, ...]  # linear: (out, in); conv: (c_out, c_in/g, kh, kw...); embedding: (rows, dim)
    bias: bool = False

    @property
    def params(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count + (self.shape[0] if self.bias else 0)


@dataclass
class ModuleFacts:
    module_instances: dict[str, int] = field(default_factory=dict)  # class -> distinct instances
    module_calls: dict[str, int] = field(default_factory=dict)
    weights: list[Weight] = field(default_factory=list)
    weights_per_instance: bool = False  # weights de-duplicated by module instance
    gemm_fallback: bool = False  # weights taken from op_perf GEMMs (no aten::linear in the trace)


@dataclass
class RootModule:
    """An outermost module class (under wrappers) and the sub-module classes of its calls."""

    module_class: str
    depth: int
    calls: int
    kernel_time_us: float
    descendants: dict[str, int] = field(default_factory=dict)  # class -> distinct instances
    family: tuple[str, str, str] | None = None  # (family, kind, matched class) from the rules seed

    @property
    def holds_layers(self) -> bool:
        return layer_class(self.descendants) is not None

    @property
    def scope_classes(self) -> list[str]:
        """Its own class and its sub-module classes."""
        return sorted({self.module_class} | set(self.descendants))


def read_module_facts(db: duckdb.DuckDBPyConnection, trace_id: str, facts: ModuleFacts, sql: list[str]) -> None:
    found = rows(db, _MODULE_INSTANCES_SQL, trace_id)
    if found:
        sql.append(inline(_MODULE_INSTANCES_SQL, trace_id))
        for module_class, instances, calls in found:
            if module_class:
                facts.module_instances[module_class] = int(instances)
                facts.module_calls[module_class] = int(calls)
    # the ops' own module chains add the classes no module frame of this trace shows: those of the
    # ops a GPU-graph capture merge grafted in (the replay records no module frames for them)
    added = [(c, n) for c, n in rows(db, _MODULE_CHAIN_SQL, trace_id) if c and c not in facts.module_calls]
    if added:
        sql.append(inline(_MODULE_CHAIN_SQL, trace_id))
        for module_class, calls in added:
            facts.module_calls[module_class] = int(calls)


def read_roots(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> list[RootModule]:
    """The outermost module classes, most GPU kernel time first, with their sub-module classes."""
    roots = [RootModule(c, int(d), int(n), float(t or 0.0))
             for c, d, n, t in rows(db, _ROOT_MODULES_SQL, trace_id)]
    if not roots:
        return []
    by_class = {r.module_class: r for r in roots}
    for root_class, module_class, instances in rows(db, _ROOT_DESCENDANTS_SQL, trace_id):
        by_class[root_class].descendants[module_class] = int(instances)
    sql.extend(inline(query, trace_id) for query in (_ROOT_MODULES_SQL, _ROOT_DESCENDANTS_SQL))
    return roots


def _weight_of(op_name: str, dims: list) -> Weight | None:
    if op_name == "aten::linear" and len(dims) >= 2 and len(dims[1]) == 2:
        return Weight("linear", tuple(dims[1]), bias=len(dims) > 2 and bool(dims[2]))
    if op_name == "aten::convolution" and len(dims) >= 2 and len(dims[1]) >= 3:
        return Weight("conv", tuple(dims[1]), bias=len(dims) > 2 and bool(dims[2]))
    if op_name in ("aten::embedding", "aten::embedding_bag") and dims and len(dims[0]) == 2:
        return Weight("embedding", tuple(dims[0]))
    return None


def read_weights(db: duckdb.DuckDBPyConnection, trace_id: str, facts: ModuleFacts, sql: list[str],
                 component: RootModule | None = None) -> None:
    """The weight operands; of one component's calls only when `component` is given (a pipeline)."""
    weight_ops = rows(db, _WEIGHT_OPS_SQL, trace_id)
    if component is not None:
        weight_ops = [r for r in weight_ops if r[4] is not None and len(r[4]) > component.depth
                      and r[4][component.depth] == component.module_class]
    seen: set[tuple] = set()
    with_instance = 0
    for op_id, op_name, input_dims, module_instance, _chain in weight_ops:
        weight = _weight_of(op_name, json_dims(input_dims))
        if weight is None:
            continue
        key = (module_instance, weight.kind, weight.shape) if module_instance else ("op", op_id)
        with_instance += module_instance is not None
        if key in seen:
            continue
        seen.add(key)
        facts.weights.append(weight)
    if weight_ops:
        sql.append(inline(_WEIGHT_OPS_SQL, trace_id))
    facts.weights_per_instance = bool(facts.weights) and with_instance == len(weight_ops)
    if not any(w.kind == "linear" for w in facts.weights):
        _read_gemm_weights(db, trace_id, facts, sql, component.calls if component is not None else 1)


def _read_gemm_weights(db: duckdb.DuckDBPyConnection, trace_id: str, facts: ModuleFacts, sql: list[str],
                       model_calls: int = 1) -> None:
    """No aten::linear (compiled graphs, custom runtimes): the weight operand of each plain GEMM, once per
    call of the model (a pipeline's denoiser runs its GEMMs once per denoising step)."""
    gemm_rows = rows(db, _GEMM_SHAPES_SQL, trace_id)
    for perf_params, count in gemm_rows:
        try:
            params = json.loads(perf_params)
        except ValueError:
            continue
        if int(params.get("B") or 1) != 1 or not params.get("K") or not params.get("N"):
            continue
        weight = Weight("linear", (int(params["N"]), int(params["K"])), bias=bool(params.get("bias")))
        repeats = max(1, int(count or 1) // model_calls) if int(count or 1) % model_calls == 0 else int(count or 1)
        facts.weights.extend(Weight(weight.kind, weight.shape, weight.bias) for _ in range(repeats))
        facts.gemm_fallback = True
    if gemm_rows:
        sql.append(inline(_GEMM_SHAPES_SQL, trace_id))


def read_attention(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> dict[str, Any]:
    """Heads, key-value heads, head dim and causality of the attention op with the most kernel time."""
    found = rows(db, _ATTENTION_SQL, trace_id)
    if not found:
        return {}
    sql.append(inline(_ATTENTION_SQL, trace_id))
    for name, _category, perf_params, input_dims, _time in found:
        try:
            params = json.loads(perf_params) if perf_params else {}
        except ValueError:
            params = {}
        if params.get("H_Q"):
            return {"op": name, "heads": int(params["H_Q"]), "kv_heads": int(params.get("H_KV") or params["H_Q"]),
                    "head_dim": int(params.get("d_h_qk") or 0) or None, "causal": params.get("causal")}
        dims = json_dims(input_dims)
        # inference attention ops take q, k, v as (tokens, heads, head_dim)
        if len(dims) >= 2 and len(dims[0]) == 3 and len(dims[1]) == 3:
            return {"op": name, "heads": int(dims[0][1]), "kv_heads": int(dims[1][1]),
                    "head_dim": int(dims[0][2]), "causal": None}
    return {}


def read_op_kinds(db: duckdb.DuckDBPyConnection, trace_id: str) -> dict[str, int]:
    """How many cpu ops of each kind that shows an architecture the trace holds (model_op_kinds)."""
    found = db.execute(f"select {', '.join(OP_KINDS)} from model_op_kinds where trace_id = ?", [trace_id]).fetchone()
    return dict(zip(OP_KINDS, found or (0,) * len(OP_KINDS), strict=True))


@dataclass
class KernelMix:
    time_us_by_type: dict[str, float]  # kernel_type -> GPU time, µs
    flags: dict[str, bool]  # KERNEL_FLAGS: a kernel name shows the trait


def read_kernel_mix(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> KernelMix:
    kernel_rows = rows(db, _KERNEL_MIX_SQL, trace_id)
    if kernel_rows:
        sql.append(inline(_KERNEL_MIX_SQL, trace_id))
    return KernelMix({r[0]: float(r[2] or 0.0) for r in kernel_rows},
                     {flag: any(r[3 + i] for r in kernel_rows) for i, flag in enumerate(KERNEL_FLAGS)})


def read_world_size(db: duckdb.DuckDBPyConnection, trace_id: str) -> int | None:
    found = db.execute("select world_size from traces where trace_id = ?", [trace_id]).fetchone()
    return int(found[0]) if found and found[0] else None


def read_is_compiled(db: duckdb.DuckDBPyConnection, trace_id: str) -> bool:
    """Most GPU time runs compiled code (workload_facts, the one definition the advice uses)."""
    found = db.execute("select is_compiled from workload_facts where trace_id = ?", [trace_id]).fetchone()
    return bool(found and found[0])
