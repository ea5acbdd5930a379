"""Deterministic model identification from the warehouse (no LLM).

What the trace tells about the model, read with SQL and decided by rules:

- the model: the outermost ``nn.Module`` calls of the module-call tree (``module_calls``; under data-
  parallel / compile wrappers, not containers) that hold a repeated layer are the trace's models; the
  one with the most GPU kernel time names the model, and several of them (text encoders, a diffusion
  transformer, a VAE) are described as a pipeline of those components;
- family: that model's class and its sub-module classes (``module_calls.module_class``, or
  ``cpu_ops.module_chain``) against the family rules seed (seeds/model_family_rules.csv:
  ``Qwen2DecoderLayer`` -> Qwen), else the model class without its task head
  (``TimesformerForVideoClassification`` -> Timesformer);
- layer count: distinct instances of the repeated layer class (``BertLayer_0`` .. ``BertLayer_3``);
- weights: the weight operand of ``aten::linear`` / ``aten::convolution`` / ``aten::embedding``,
  one per module instance (the innermost ``nn.Module`` call around the op, ``module_call_events``), so repeated passes
  and activation-checkpoint recomputes count once; without module frames, the GEMMs of ``op_perf``;
- hidden size = most common input width of the linear weights, FFN width = input width of the
  down projection, vocabulary = rows of the largest embedding table (or columns of the output head);
- attention: heads and head dim from the SDPA ``perf_params`` (or the q/k tensors of an inference
  attention op);
- precision: the dtypes of the matrix kernels (``kernels.kernel_precision``) weighted by GPU time,
  else the input dtypes of the modelled ops;
- checkpoint: the published configurations seed (seeds/model_configs.csv) the numbers match.

Whatever the trace does not show is ``Cannot be inferred from trace`` (the seed's wording); the model
itself only when the trace names no module that holds layers of its own.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

import duckdb
from pydantic import BaseModel, Field

from tracelake.core.markdown_text import code, sql_literal

UNKNOWN = "Cannot be inferred from trace"

# The family rules (module class -> family) and the published checkpoint configurations are
# seeds: seeds/model_family_rules.csv and seeds/model_configs.csv.

_ARCHITECTURE_OF_KIND = {
    "decoder": "Decoder-only Transformer",
    "encoder": "Encoder-only Transformer",
    "encoder-decoder": "Encoder-decoder Transformer",
    "unet": "Diffusion UNet (convolution + attention)",
    "recommendation": "Recommendation model (embedding tables + MLP)",
    "ssm": "State-space model",
    "cnn": "Convolutional neural network",
}

# A repeated layer: decoder/encoder layers and blocks, not their sub-modules or containers.
_LAYER_CLASS = re.compile(r"(DecoderLayer|EncoderLayer|Layer|Block|Bottleneck|BasicBlock)$")
_NOT_A_LAYER = re.compile(r"(?i)(mlp|attention|attn|feedforward|ffn|norm|embedding|^sequential$|^modulelist$|^linear$)")
_TENSOR_PARALLEL_CLASS = re.compile(r"(ColumnParallelLinear|RowParallelLinear|QKVParallelLinear|VocabParallelEmbedding|ParallelLMHead)")
_MOE_CLASS = re.compile(r"(?i)(moe|experts?$|sparse.*block)")
# Classes that wrap a model (data parallel, torch.compile) and containers: never a model's name; the
# model is the outermost call under the wrappers, and a container at the top holds parts of one.
_WRAPPER_CLASSES = ("DistributedDataParallel", "FullyShardedDataParallel", "DataParallel", "OptimizedModule")
_CONTAINER_CLASSES = ("Sequential", "ModuleList", "ModuleDict")
# The task head or suffix of a model class (Hugging Face / diffusers naming): the rest names the family.
_TASK_SUFFIX = re.compile(r"(For[A-Z]\w*|LMHeadModel|PreTrainedModel|Model(With[A-Z]\w*)?)$")


_MATRIX_KERNEL_LABEL = {"gemm": "GEMM", "moe": "MoE expert GEMMs", "attention": "attention", "conv": "convolution"}


class ModelComponent(BaseModel):
    """One model of the trace: an outermost nn.Module class that holds layers of its own."""

    module_class: str
    family: str | None = None  # the family rule its classes match, if any
    calls: int
    kernel_time_ms: float  # GPU kernel time launched within its calls
    kernel_time_percent: float  # share of all components' kernel time


class ModelInfo(BaseModel):
    """What the trace says about the model; unknowns are spelled ``Cannot be inferred from trace``."""

    model: str = UNKNOWN  # the seed's `model` key: checkpoint, model class, family or pipeline
    model_family: str = UNKNOWN
    model_name: str | None = None  # a published checkpoint whose configuration the trace matches
    architecture: str = UNKNOWN
    scale: str = UNKNOWN
    precision: str = UNKNOWN
    evidence: list[str] = Field(default_factory=list)  # markdown: names as code spans (markdown_text.code)
    confidence: Literal["high", "medium", "low"] = "low"
    # the structured numbers behind scale (None = not visible in the trace)
    hidden_size: int | None = None
    num_layers: int | None = None
    ffn_size: int | None = None
    vocab_size: int | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    num_experts: int | None = None
    tensor_parallel: int | None = None
    parameter_estimate: int | None = None
    evidence_sql: list[str] = Field(default_factory=list)  # queries (trace id inlined) behind the evidence
    # the trace's models, most GPU time first; more than one: a pipeline (the first is where the time goes)
    components: list[ModelComponent] = Field(default_factory=list)
    is_pipeline: bool = False

    @property
    def display_name(self) -> str:
        """The name the report title uses: checkpoint, else family, else ``Workload``."""
        if self.model_name:
            return self.model_name
        if self.model_family and self.model_family != UNKNOWN:
            return self.model_family
        return "Workload"

    def seed_json(self) -> dict[str, str]:
        """The seed's four-key ``model_info.json``."""
        return {"model": self.model, "architecture": self.architecture,
                "scale": self.scale, "precision": self.precision}


# ---- SQL ---------------------------------------------------------------------------------------

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

# The outermost module calls (under wrappers only) by class, and their sub-module classes.
_ROOT_CALLS_CTE = """
with calls as (
    select * from module_calls where trace_id = $trace_id
),
roots as (
    select * from calls
    where not list_contains($skipped::varchar[], module_class)
      and len(list_filter(module_chain[1:depth], lambda c: not list_contains($wrappers::varchar[], c))) = 0
)
"""

_ROOT_MODULES_SQL = _ROOT_CALLS_CTE + """
select module_class, min(depth) as depth, count(*) as calls, sum(kernel_time_us) as kernel_time_us
from roots
group by module_class
order by kernel_time_us desc, min(ts_us)
"""

_ROOT_DESCENDANTS_SQL = _ROOT_CALLS_CTE + """
select root_classes.module_class as root_class, calls.module_class, count(distinct calls.module_instance) as instances
from (select distinct module_class, depth from roots) as root_classes
join calls
  on calls.depth > root_classes.depth and calls.module_chain[root_classes.depth + 1] = root_classes.module_class
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

# The family rules matching any of the trace's module classes, best rule first.
_FAMILY_MATCHES_SQL = """
select model_family_rules.rule_order, model_family_rules.family, model_family_rules.kind, classes.module_class
from model_family_rules
join (select unnest($classes::varchar[]) as module_class) as classes
  on regexp_matches(classes.module_class, model_family_rules.class_pattern)
order by model_family_rules.rule_order, classes.module_class
"""

# The first published checkpoint whose configuration the trace's numbers match.
_CHECKPOINT_SQL = """
select checkpoint, hidden_size, num_layers, ffn_size, vocab_size
from model_configs
where family = $family and hidden_size = $hidden and num_layers = $layers
  and (ffn_size is null or $ffn::integer is null or ffn_size = $ffn)
  and (vocab_size is null or $vocab::integer is null or vocab_size = $vocab)
order by match_order
limit 1
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

_OP_NAMES_SQL = """
select
    count(*) as cpu_ops,
    count(*) filter (where name in ('aten::convolution', 'aten::conv2d', 'aten::conv1d', 'aten::conv3d')) as conv_ops,
    count(*) filter (where name like '%scaled_dot_product%' or name like '%flash_attention%' or name like '%attention%') as attention_ops,
    count(*) filter (where name in ('aten::bmm', 'aten::baddbmm')) as bmm_ops,
    count(*) filter (where name in ('aten::softmax', 'aten::_softmax', 'aten::_safe_softmax')) as softmax_ops,
    count(*) filter (where name in ('aten::lstm', 'aten::gru', 'aten::rnn_tanh', 'aten::_cudnn_rnn', 'aten::miopen_rnn')) as rnn_ops,
    count(*) filter (where name = 'aten::embedding_bag' or name like 'fbgemm::%') as sparse_embedding_ops,
    count(*) filter (where lower(name) like '%moe%' or lower(name) like '%expert%') as moe_ops,
    count(*) filter (where name like 'Torch-Compiled Region%') as compiled_regions
from cpu_ops
where trace_id = $trace_id
"""


def _inline(sql: str, trace_id: str) -> str:
    """The query with the trace id written in, so a reader can paste it into `tracelake sql`."""
    return " ".join(sql.replace("$trace_id", f"'{trace_id}'").split())


def _rows(db: duckdb.DuckDBPyConnection, sql: str, trace_id: str) -> list[tuple]:
    return db.execute(sql, {"trace_id": trace_id}).fetchall()


def _dims(text: str | None) -> list:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def _table_exists(db: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(db.execute(
        "select count(*) from information_schema.tables where table_name = ?", [name]).fetchone()[0])


# ---- evidence gathering ------------------------------------------------------------------------

@dataclass
class _Weight:
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
class _Facts:
    module_instances: dict[str, int] = field(default_factory=dict)  # class -> distinct instances
    module_calls: dict[str, int] = field(default_factory=dict)
    weights: list[_Weight] = field(default_factory=list)
    weights_per_instance: bool = False  # weights de-duplicated by module instance
    gemm_fallback: bool = False  # weights taken from op_perf GEMMs (no aten::linear in the trace)


def _module_facts(db: duckdb.DuckDBPyConnection, trace_id: str, facts: _Facts, sql: list[str]) -> None:
    rows = _rows(db, _MODULE_INSTANCES_SQL, trace_id)
    if rows:
        sql.append(_inline(_MODULE_INSTANCES_SQL, trace_id))
        for module_class, instances, calls in rows:
            if module_class:
                facts.module_instances[module_class] = int(instances)
                facts.module_calls[module_class] = int(calls)
    # the ops' own module chains add the classes no module frame of this trace shows: those of the
    # ops a GPU-graph capture merge grafted in (the replay records no module frames for them)
    rows = _rows(db, _MODULE_CHAIN_SQL, trace_id)
    added = [(c, n) for c, n in rows if c and c not in facts.module_calls]
    if added:
        sql.append(_inline(_MODULE_CHAIN_SQL, trace_id))
        for module_class, calls in added:
            facts.module_calls[module_class] = int(calls)


@dataclass
class _Root:
    """An outermost module class (under wrappers) and the sub-module classes of its calls."""

    module_class: str
    depth: int
    calls: int
    kernel_time_us: float
    descendants: dict[str, int] = field(default_factory=dict)  # class -> distinct instances
    family: tuple[str, str, str] | None = None  # (family, kind, matched class) from the rules seed

    @property
    def holds_layers(self) -> bool:
        return _layer_class(self.descendants) is not None


def _roots(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> list[_Root]:
    """The outermost module classes, most GPU kernel time first, with their sub-module classes."""
    params = {"trace_id": trace_id, "skipped": list(_WRAPPER_CLASSES + _CONTAINER_CLASSES),
              "wrappers": list(_WRAPPER_CLASSES)}
    roots = [_Root(c, int(d), int(n), float(t or 0.0)) for c, d, n, t in db.execute(_ROOT_MODULES_SQL, params).fetchall()]
    if not roots:
        return []
    by_class = {r.module_class: r for r in roots}
    for root_class, module_class, instances in db.execute(_ROOT_DESCENDANTS_SQL, params).fetchall():
        by_class[root_class].descendants[module_class] = int(instances)
    lists = lambda names: "[" + ", ".join(sql_literal(n) for n in names) + "]"  # noqa: E731
    for query in (_ROOT_MODULES_SQL, _ROOT_DESCENDANTS_SQL):
        sql.append(" ".join(_inline(query, trace_id).replace("$skipped", lists(params["skipped"]))
                            .replace("$wrappers", lists(params["wrappers"])).split()))
    return roots


def _class_stem(module_class: str) -> str:
    """The model class without its task head: TimesformerForVideoClassification -> Timesformer."""
    return _TASK_SUFFIX.sub("", module_class) or module_class


def _weight_facts(db: duckdb.DuckDBPyConnection, trace_id: str, facts: _Facts, sql: list[str],
                  component: _Root | None = None) -> None:
    """The weight operands; of one component's calls only when `component` is given (a pipeline)."""
    rows = _rows(db, _WEIGHT_OPS_SQL, trace_id)
    if component is not None:
        rows = [r for r in rows if r[4] is not None and len(r[4]) > component.depth
                and r[4][component.depth] == component.module_class]
    seen: set[tuple] = set()
    with_instance = 0
    for op_id, op_name, input_dims, module_instance, _chain in rows:
        dims = _dims(input_dims)
        weight: _Weight | None = None
        if op_name == "aten::linear" and len(dims) >= 2 and len(dims[1]) == 2:
            weight = _Weight("linear", tuple(dims[1]), bias=len(dims) > 2 and bool(dims[2]))
        elif op_name == "aten::convolution" and len(dims) >= 2 and len(dims[1]) >= 3:
            weight = _Weight("conv", tuple(dims[1]), bias=len(dims) > 2 and bool(dims[2]))
        elif op_name in ("aten::embedding", "aten::embedding_bag") and dims and len(dims[0]) == 2:
            weight = _Weight("embedding", tuple(dims[0]))
        if weight is None:
            continue
        key = (module_instance, weight.kind, weight.shape) if module_instance else ("op", op_id)
        with_instance += module_instance is not None
        if key in seen:
            continue
        seen.add(key)
        facts.weights.append(weight)
    if rows:
        sql.append(_inline(_WEIGHT_OPS_SQL, trace_id))
    facts.weights_per_instance = bool(facts.weights) and with_instance == len(rows)
    if any(w.kind == "linear" for w in facts.weights):
        return
    # No aten::linear (compiled graphs, custom runtimes): the weight operand of each plain GEMM.
    gemm_rows = _rows(db, _GEMM_SHAPES_SQL, trace_id)
    for perf_params, count in gemm_rows:
        try:
            params = json.loads(perf_params)
        except ValueError:
            continue
        if int(params.get("B") or 1) != 1 or not params.get("K") or not params.get("N"):
            continue
        weight = _Weight("linear", (int(params["N"]), int(params["K"])), bias=bool(params.get("bias")))
        facts.weights.extend(_Weight(weight.kind, weight.shape, weight.bias) for _ in range(int(count or 1)))
        facts.gemm_fallback = True
    if gemm_rows:
        sql.append(_inline(_GEMM_SHAPES_SQL, trace_id))


def _attention_facts(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> dict:
    rows = _rows(db, _ATTENTION_SQL, trace_id)
    if not rows:
        return {}
    sql.append(_inline(_ATTENTION_SQL, trace_id))
    for name, _category, perf_params, input_dims, _time in rows:
        try:
            params = json.loads(perf_params) if perf_params else {}
        except ValueError:
            params = {}
        if params.get("H_Q"):
            return {"op": name, "heads": int(params["H_Q"]), "kv_heads": int(params.get("H_KV") or params["H_Q"]),
                    "head_dim": int(params.get("d_h_qk") or 0) or None, "causal": params.get("causal")}
        dims = _dims(input_dims)
        # inference attention ops take q, k, v as (tokens, heads, head_dim)
        if len(dims) >= 2 and len(dims[0]) == 3 and len(dims[1]) == 3:
            return {"op": name, "heads": int(dims[0][1]), "kv_heads": int(dims[1][1]),
                    "head_dim": int(dims[0][2]), "causal": None}
    return {}


# ---- decisions ---------------------------------------------------------------------------------

def _family(db: duckdb.DuckDBPyConnection, facts: _Facts, classes: list[str],
            sql: list[str]) -> tuple[str, str, str] | None:
    """The first family rule (seeds/model_family_rules.csv) that matches a module class; cites the
    outermost matching class."""
    if not classes:
        return None
    rows = db.execute(_FAMILY_MATCHES_SQL, {"classes": classes}).fetchall()
    if not rows:
        return None
    sql.append(" ".join(_FAMILY_MATCHES_SQL.replace("$classes", "[" + ", ".join(sql_literal(c) for c in classes)
                                                    + "]").split()))
    best_rule, family, kind = rows[0][0], rows[0][1], rows[0][2]
    matched = [r[3] for r in rows if r[0] == best_rule]
    matched.sort(key=lambda c: (not re.search(r"(Model|For[A-Z]\w*)$", c), facts.module_instances.get(c, 1), -len(c)))
    return family, kind, matched[0]


def _layer_class(instances: dict[str, int]) -> tuple[str, int] | None:
    candidates = [(n, c) for c, n in instances.items()
                  if n >= 2 and _LAYER_CLASS.search(c) and not _NOT_A_LAYER.search(c)]
    if not candidates:
        return None
    count, module_class = max(candidates)
    return module_class, count


def _most_common(values: list[int]) -> int | None:
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return max(v for v, c in counts.items() if c == best)  # ties: the wider one


def _precision_name(dtype: str | None, dtype_map: dict[str, str]) -> str | None:
    if not dtype:
        return None
    return dtype_map.get(dtype.strip().lower())


def _precision(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str], evidence: list[str]) -> str:
    dtype_map = {name.lower(): precision for name, precision in db.execute(
        "select dtype_name, precision from dtypes").fetchall()} if _table_exists(db, "dtypes") else {}
    activation = None
    op_rows = _rows(db, _OP_DTYPE_SQL, trace_id)
    op_time: Counter[str] = Counter()
    for input_type, time_us in op_rows:
        types = _dims(input_type)
        first = next((_precision_name(t, dtype_map) for t in types if _precision_name(t, dtype_map)), None)
        if first and first not in ("int64", "int32"):
            op_time[first] += float(time_us or 0.0)
    if op_time:
        sql.append(_inline(_OP_DTYPE_SQL, trace_id))
        activation = op_time.most_common(1)[0][0]
        evidence.append(f"inputs of the modelled GEMM/attention/convolution ops are {activation.upper()} "
                        f"(by kernel time)")
    rows = _rows(db, _MATRIX_PRECISION_SQL, trace_id)
    if rows:
        sql.append(_inline(_MATRIX_PRECISION_SQL, trace_id))
        total = sum(float(r[3]) for r in rows) or 1.0
        by_precision: Counter[str] = Counter()
        for _, precision, _, time_us in rows:
            by_precision[precision] += float(time_us)
        parts = []
        for kernel_type, precision, kernels, time_us in rows:
            share = 100.0 * float(time_us) / total
            if share >= 1.0:
                parts.append(f"{precision.upper()} {_MATRIX_KERNEL_LABEL.get(kernel_type, kernel_type)} ({share:.0f}%)")
        evidence.append("matrix-kernel time by precision: " + ", ".join(
            f"{p.upper()} {100.0 * t / total:.1f}%" for p, t in by_precision.most_common() if t / total >= 0.0005))
        top, top_time = by_precision.most_common(1)[0]
        if top_time / total >= 0.95:
            result = top.upper()
            if activation and activation != top:
                result += f" matrix kernels; {activation.upper()} op inputs"
            return result
        text = "Mixed: " + ", ".join(parts) + " of matrix-kernel time"
        if activation:
            text += f"; activations {activation.upper()}"
        return text
    if activation:
        return activation.upper()
    return UNKNOWN


def _param_text(count: int) -> str:
    if count >= 1e8:  # 0.46B rather than 463.9M, as checkpoints are named
        return f"~{count / 1e9:.2f}B parameters"
    if count >= 1e6:
        return f"~{count / 1e6:.1f}M parameters"
    return f"~{count / 1e3:.0f}K parameters"


def identify_model(db: duckdb.DuckDBPyConnection, trace_id: str) -> ModelInfo:
    """Model family, architecture, scale and precision of one trace, from the warehouse alone."""
    evidence: list[str] = []
    sql: list[str] = []
    facts = _Facts()
    _module_facts(db, trace_id, facts, sql)
    components = _components(db, facts, _roots(db, trace_id, sql))
    model = components[0] if components else None  # where the GPU time goes
    is_pipeline = len(components) >= 2
    # a pipeline's scale is its main model's: the weights of that component's calls only
    _weight_facts(db, trace_id, facts, sql, model if is_pipeline else None)
    attention = _attention_facts(db, trace_id, sql)
    op_counts = dict(zip(
        ("cpu_ops", "conv_ops", "attention_ops", "bmm_ops", "softmax_ops", "rnn_ops", "sparse_embedding_ops",
         "moe_ops", "compiled_regions"),
        _rows(db, _OP_NAMES_SQL, trace_id)[0], strict=True))
    kernel_rows = _rows(db, _KERNEL_MIX_SQL, trace_id)
    if kernel_rows:
        sql.append(_inline(_KERNEL_MIX_SQL, trace_id))
    kernel_time = {r[0]: float(r[2] or 0.0) for r in kernel_rows}
    kernel_flags = {flag: any(r[3 + i] for r in kernel_rows)
                    for i, flag in enumerate(("rms_norm", "layer_norm", "batch_norm", "silu", "gelu", "rotary"))}
    world_size_row = db.execute("select world_size from traces where trace_id = $trace_id",
                                {"trace_id": trace_id}).fetchone()
    world_size = int(world_size_row[0]) if world_size_row and world_size_row[0] else None

    info = ModelInfo()
    classes = sorted(set(facts.module_instances) | set(facts.module_calls))
    linears = [w for w in facts.weights if w.kind == "linear"]
    embeddings = [w for w in facts.weights if w.kind == "embedding"]
    convs = [w for w in facts.weights if w.kind == "conv"]

    # -- model and family -------------------------------------------------------------------------
    family = _family(db, facts, _scope_classes(model) if model else classes, sql)
    kind = None
    if model is not None:
        evidence.append(_model_sentence(model, components))
    if family:
        info.model_family, kind, matched = family
        evidence.append(f"nn.Module class {code(matched)} identifies the {info.model_family} family")
    elif model is not None:
        info.model_family, info.model_name = _class_stem(model.module_class), model.module_class
        evidence.append(f"no family rule matches its classes: the family is the class without its task head, "
                        f"{code(info.model_family)}")
    elif classes:
        evidence.append("module classes seen: " + ", ".join(code(c) for c in classes[:12])
                        + " (none names a known model family)")
    tensor_parallel_classes = [c for c in classes if _TENSOR_PARALLEL_CLASS.search(c)]
    if tensor_parallel_classes and world_size and world_size > 1:
        info.tensor_parallel = world_size
        evidence.append(f"tensor-parallel modules ({', '.join(code(c) for c in tensor_parallel_classes[:3])}) "
                        f"in a {world_size}-rank job: per-rank widths are multiplied by {world_size}")
    tp = info.tensor_parallel or 1

    # -- what kind of network the ops and kernels show -------------------------------------------
    has_attention = bool(attention) or op_counts["attention_ops"] > 0 or "attention" in kernel_time or (
        op_counts["bmm_ops"] > 0 and op_counts["softmax_ops"] > 0)
    has_conv = bool(convs) or op_counts["conv_ops"] > 0 or "conv" in kernel_time
    is_cnn = kind == "cnn" or (kind is None and has_conv and not has_attention)
    moe_classes = [c for c in classes if _MOE_CLASS.search(c)]
    is_moe = bool(moe_classes) or op_counts["moe_ops"] > 0 or "moe" in kernel_time

    # -- layers ---------------------------------------------------------------------------------
    layer = _layer_class(model.descendants if model else facts.module_instances)
    if layer:
        info.num_layers = layer[1]
        evidence.append(f"{layer[1]} distinct {code(layer[0])} instances")

    # -- weights: hidden, FFN, vocabulary ----------------------------------------------------------
    largest_table = max(embeddings, key=lambda w: w.shape[0], default=None)
    vocab_rows = largest_table.shape[0] if largest_table and largest_table.shape[0] >= 1000 else None
    input_widths = {w.shape[1] for w in linears}
    # an output head: much wider than its input and never the input of another linear (an FFN
    # up-projection always has a down-projection that takes its width back)
    head_rows = max((w.shape[0] for w in linears if w.shape[0] >= 1000 and w.shape[0] > 4 * w.shape[1]
                     and w.shape[0] not in input_widths), default=None)
    if linears and not is_cnn:
        body = [w for w in linears if w.shape[0] not in (vocab_rows, head_rows)] or linears
        info.hidden_size = _most_common([w.shape[1] for w in body])
        downs = [w.shape[1] for w in body if w.shape[0] == info.hidden_size and w.shape[1] > info.hidden_size]
        if downs:
            info.ffn_size = _most_common(downs)
        source = "GEMM weight shapes in `op_perf` (K x N)" if facts.gemm_fallback else "`aten::linear` weights"
        evidence.append(f"hidden size {info.hidden_size}: most common input width of the {source}"
                        + (f"; FFN width {info.ffn_size} from the down projection" if info.ffn_size else ""))
        if largest_table and largest_table.shape[1] == info.hidden_size:
            evidence.append(f"embedding table {largest_table.shape[0]} x {largest_table.shape[1]} has the hidden width")
    vocab_per_rank = (vocab_rows or head_rows) if not is_cnn else None
    if vocab_per_rank:
        info.vocab_size = vocab_per_rank * tp
        evidence.append(f"vocabulary {info.vocab_size}" + (f" ({vocab_per_rank} per rank x {tp})" if tp > 1 else "")
                        + (" from the embedding table" if vocab_rows else " from the output-head GEMM"))
    if info.num_layers is None and facts.gemm_fallback and info.hidden_size:
        # no module frames: the rarest per-layer weight shape occurs once per layer
        shape_counts = Counter(w.shape for w in linears if info.hidden_size in w.shape and w.shape[0] != vocab_per_rank)
        if shape_counts:
            info.num_layers = min(shape_counts.values())
            evidence.append(f"{info.num_layers} layer(s) estimated from repeated GEMM weight shapes ("
                            + ", ".join(f"{k}x{n}: {c}" for (n, k), c in sorted(shape_counts.items())) + ")")

    # -- attention --------------------------------------------------------------------------------
    if attention:
        info.num_heads = attention["heads"] * tp
        info.num_kv_heads = attention["kv_heads"] * tp
        info.head_dim = attention["head_dim"]
        evidence.append(f"{code(attention['op'])}: {attention['heads']} query / {attention['kv_heads']} key-value heads"
                        + (" per rank" if tp > 1 else "") + f", head dim {attention['head_dim']}"
                        + ("" if attention["causal"] is None else f", causal={str(attention['causal']).lower()}"))

    # -- experts ------------------------------------------------------------------------------------
    if is_moe:
        routers = [w.shape[0] for w in linears if info.hidden_size and w.shape[1] == info.hidden_size
                   and 8 <= w.shape[0] < info.hidden_size and (w.shape[0] & (w.shape[0] - 1)) == 0]
        if routers and moe_classes:
            info.num_experts = _most_common(routers)
            evidence.append(f"router GEMM {info.hidden_size} -> {info.num_experts} inside the MoE layer: "
                            f"{info.num_experts} experts")
        evidence.append("mixture-of-experts: " + ", ".join(
            ([f"module {code(moe_classes[0])}"] if moe_classes else [])
            + ([f"{op_counts['moe_ops']} MoE ops"] if op_counts["moe_ops"] else [])
            + ([f"MoE kernels {kernel_time['moe'] / 1000:.3f} ms"] if "moe" in kernel_time else [])))

    # -- parameter estimate -----------------------------------------------------------------------
    if (linears or convs) and tp == 1 and not is_moe:
        tied = next((w for w in linears if largest_table and vocab_rows and w.shape == largest_table.shape), None)
        # a head with the embedding table's shape shares its weight (tied): only its bias is new
        info.parameter_estimate = sum(
            (w.shape[0] if w.bias else 0) if w is tied else w.params for w in facts.weights)
        how = "one weight per module instance" if facts.weights_per_instance else "each weight op counted once"
        evidence.append(f"{_param_text(info.parameter_estimate)[1:]} in {len(facts.weights)} weight tensors "
                        f"({how}; normalization parameters not counted"
                        + ("; output head tied to the embedding table" if tied else "") + ")")

    # -- architecture -----------------------------------------------------------------------------
    traits: list[str] = []
    if kind:
        base = _ARCHITECTURE_OF_KIND[kind]
    elif has_conv and has_attention:
        base = "Hybrid (CNN + Transformer)"
    elif has_attention:
        base = "Transformer block" if info.num_layers == 1 else "Transformer"
        causal = attention.get("causal") if attention else None
        if causal is not None:
            traits.append("causal attention" if causal else "bidirectional attention")
    elif has_conv:
        base = _ARCHITECTURE_OF_KIND["cnn"]
    elif op_counts["rnn_ops"]:
        base = "Recurrent neural network (RNN)"
    elif op_counts["sparse_embedding_ops"]:
        base = _ARCHITECTURE_OF_KIND["recommendation"]
    else:
        base = None
    if is_moe and "Mixture" not in (base or ""):
        traits.append(f"Mixture-of-Experts, {info.num_experts} experts" if info.num_experts else "Mixture-of-Experts")
    if has_attention and info.num_heads and info.num_kv_heads:
        if info.num_kv_heads == info.num_heads:
            traits.append("multi-head attention")
        elif info.num_kv_heads == 1:
            traits.append("multi-query attention")
        else:
            traits.append(f"grouped-query attention, {info.num_heads // info.num_kv_heads} query heads per KV head")
    names = " ".join(classes).lower()
    if "rmsnorm" in names or kernel_flags["rms_norm"]:
        traits.append("RMSNorm")
    elif "layernorm" in names or kernel_flags["layer_norm"]:
        traits.append("LayerNorm")
    if "batchnorm" in names or kernel_flags["batch_norm"]:
        traits.append("batch normalization")
    if has_attention and ("silu" in names or kernel_flags["silu"]):
        traits.append("SiLU-gated MLP")
    elif has_attention and ("gelu" in names or kernel_flags["gelu"]):
        traits.append("GELU MLP")
    if "rotary" in names or kernel_flags["rotary"]:
        traits.append("rotary position embeddings")
    if {"BasicBlock", "Bottleneck"} & set(classes):
        traits.append("residual " + ("bottleneck" if "Bottleneck" in classes else "basic") + " blocks")
    # compiled: most GPU time runs compiled code (workload_facts, the one definition the advice uses)
    if _rows(db, "select is_compiled from workload_facts where trace_id = $trace_id", trace_id)[0][0]:
        traits.append("torch.compile / Triton-generated kernels")
    if base:
        info.architecture = base + (f" ({', '.join(traits)})" if traits else "")
        if not kind:
            evidence.append("architecture from op and kernel names: " + ", ".join(
                k for k, present in (("attention", has_attention), ("convolution", has_conv), ("MoE", is_moe))
                if present))

    # -- checkpoint name ----------------------------------------------------------------------------
    blocks_basic = facts.module_instances.get("BasicBlock", 0)
    blocks_bottleneck = facts.module_instances.get("Bottleneck", 0)
    if info.model_family == "ResNet" and (blocks_basic or blocks_bottleneck):
        depth = 2 + 2 * blocks_basic if blocks_basic else 2 + 3 * blocks_bottleneck
        info.model_name = f"ResNet-{depth}"
        info.num_layers = depth
        evidence.append(f"{blocks_basic or blocks_bottleneck} {code('BasicBlock' if blocks_basic else 'Bottleneck')} "
                        f"instances: {depth} weight layers deep")
    elif info.hidden_size and info.num_layers:
        config = _checkpoint(db, info)
        if config:
            name, hidden, layers, ffn, vocab = config
            info.model_name = name
            evidence.append(f"hidden {hidden}, {layers} layers"
                            + (f", FFN {ffn}" if ffn and info.ffn_size else "")
                            + (f", vocabulary {vocab}" if vocab and info.vocab_size else "")
                            + f" match the published {name} configuration")

    if is_pipeline and model is not None:
        info.model_name = f"{info.model_name or model.module_class} pipeline"
        info.is_pipeline = True
        info.architecture = (f"Pipeline of {len(components)} models ("
                             + ", ".join(_component_text(c) for c in info_components(components)) + f"); the GPU time "
                             f"goes to {model.module_class}: " + info.architecture)
    info.components = info_components(components)
    info.scale = _scale_text(info, convs, linears, is_cnn)
    info.precision = _precision(db, trace_id, sql, evidence)
    named = family is not None or model is not None  # a family rule, or the model's own class
    if named and (info.num_layers or info.parameter_estimate):
        info.confidence = "high"
    elif named or (base and (linears or convs or attention)):
        info.confidence = "medium"
    else:
        info.confidence = "low"
    if not op_counts["cpu_ops"]:
        evidence.append("no CPU ops in the trace (GPU-only): module names, shapes and parameters are not visible; "
                        "architecture and precision come from kernel names")
    info.model = info.model_name or info.model_family
    info.evidence = evidence
    info.evidence_sql = sql
    return info


def _scope_classes(component: _Root) -> list[str]:
    return sorted({component.module_class} | set(component.descendants))


def _components(db: duckdb.DuckDBPyConnection, facts: _Facts, roots: list[_Root]) -> list[_Root]:
    """The outermost module classes that are models: they hold a repeated layer of their own, or
    their classes match a family rule (most GPU kernel time first)."""
    for root in roots:
        root.family = _family(db, facts, _scope_classes(root), [])
    return [r for r in roots if r.holds_layers or r.family is not None]


def info_components(components: list[_Root]) -> list[ModelComponent]:
    total = sum(c.kernel_time_us for c in components)
    return [ModelComponent(module_class=c.module_class, family=c.family[0] if c.family else None, calls=c.calls,
                           kernel_time_ms=round(c.kernel_time_us / 1000.0, 3),
                           kernel_time_percent=round(100.0 * c.kernel_time_us / total, 1) if total else 0.0)
            for c in components]


def _component_text(component: ModelComponent) -> str:
    calls = f" x{component.calls}" if component.calls > 1 else ""
    return f"{component.module_class}{calls} {component.kernel_time_percent:.0f} %"


def _model_sentence(model: _Root, components: list[_Root]) -> str:
    layer = _layer_class(model.descendants)
    layers = f" ({layer[1]} {code(layer[0])} layers)" if layer else ""
    if len(components) == 1:
        return f"the outermost nn.Module class {code(model.module_class)}{layers} names the model"
    parts = ", ".join(f"{code(c.module_class)} ({_component_text(c).split(' ', 1)[1] if ' ' in _component_text(c) else ''})"
                      for c in info_components(components))
    return (f"a pipeline of {len(components)} models, each an outermost nn.Module call with layers of its own: "
            f"{parts} of their GPU kernel time; the time goes to {code(model.module_class)}{layers}, which names it")


def _checkpoint(db: duckdb.DuckDBPyConnection, info: ModelInfo) -> tuple | None:
    """(checkpoint, hidden, layers, ffn, vocab) of the first published configuration
    (seeds/model_configs.csv) the trace's numbers match."""
    return db.execute(_CHECKPOINT_SQL, {"family": info.model_family, "hidden": info.hidden_size,
                                        "layers": info.num_layers, "ffn": info.ffn_size,
                                        "vocab": info.vocab_size}).fetchone()


def _scale_text(info: ModelInfo, convs: list[_Weight], linears: list[_Weight], is_cnn: bool) -> str:
    parts: list[str] = []
    if is_cnn:
        if convs:
            parts.append(f"{len(convs)} convolution layers")
        if info.num_layers:
            parts.append(f"{info.num_layers} layers deep")
        classifier = [w.shape[0] for w in linears]
        if classifier:
            parts.append(f"{classifier[-1]}-way classifier head")
    else:
        if info.hidden_size:
            parts.append(f"hidden {info.hidden_size}")
        if info.num_layers:
            parts.append(f"{info.num_layers} layers" if info.num_layers != 1 else "1 layer visible")
        if info.num_heads:
            heads = f"{info.num_heads} heads"
            if info.num_kv_heads and info.num_kv_heads != info.num_heads:
                heads = f"{info.num_heads} query / {info.num_kv_heads} KV heads"
            parts.append(heads + (f" x {info.head_dim}" if info.head_dim else ""))
        if info.ffn_size:
            parts.append(f"FFN {info.ffn_size}")
        if info.num_experts:
            parts.append(f"{info.num_experts} experts")
        if info.vocab_size:
            parts.append(f"vocabulary {info.vocab_size}")
        if info.tensor_parallel:
            parts.append(f"tensor-parallel {info.tensor_parallel}")
    if info.parameter_estimate:
        return _param_text(info.parameter_estimate) + (f" ({', '.join(parts)})" if parts else "")
    if not parts:
        return UNKNOWN
    text = ", ".join(parts)
    if info.num_experts or info.tensor_parallel or (info.architecture and "Mixture" in info.architecture):
        text += "; parameter count not estimated (expert and sharded weights are not visible as plain GEMMs)"
    return text
