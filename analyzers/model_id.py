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

The facts are read in model_facts / model_signals, the family and checkpoint decided in model_family,
the description written in model_architecture and model_precision; this module decides the numbers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import duckdb

from tracelake.analyzers.model_architecture import describe_architecture, param_text, scale_text
from tracelake.analyzers.model_facts import Weight, layer_class, read_is_compiled
from tracelake.analyzers.model_family import checkpoint_of, class_stem, component_text, info_components, model_sentence
from tracelake.analyzers.model_info import UNKNOWN, ModelComponent, ModelInfo
from tracelake.analyzers.model_precision import precision_of
from tracelake.analyzers.model_signals import ModelSignals, read_signals
from tracelake.core.markdown_text import code

# Family kinds whose model is a diffusion denoiser (seeds/model_family_rules.csv).
_DENOISER_KINDS = ("dit", "unet")

__all__ = ["UNKNOWN", "ModelComponent", "ModelInfo", "identify_model", "info_components"]


@dataclass
class _Vocabulary:
    """The largest embedding table and what its rows (or an output head's) say about the vocabulary."""

    largest_table: Weight | None
    vocab_rows: int | None  # rows of the largest embedding table, when it is a vocabulary's
    head_rows: int | None  # rows of an output head GEMM


def _most_common(values: list[int]) -> int | None:
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return max(v for v, c in counts.items() if c == best)  # ties: the wider one


def _name_model(signals: ModelSignals, info: ModelInfo, evidence: list[str]) -> None:
    """Family (and the model class when no rule matches), tensor parallelism and the layer count."""
    model = signals.model
    if model is not None:
        evidence.append(model_sentence(model, signals.components))
    if signals.family:
        info.model_family, _kind, matched = signals.family
        evidence.append(f"nn.Module class {code(matched)} identifies the {info.model_family} family")
    elif model is not None:
        info.model_family, info.model_name = class_stem(model.module_class), model.module_class
        evidence.append(f"no family rule matches its classes: the family is the class without its task head, "
                        f"{code(info.model_family)}")
    elif signals.classes:
        evidence.append("module classes seen: " + ", ".join(code(c) for c in signals.classes[:12])
                        + " (none names a known model family)")
    if signals.tensor_parallel:
        world_size = signals.tensor_parallel
        info.tensor_parallel = world_size
        evidence.append(f"tensor-parallel modules ({', '.join(code(c) for c in signals.tensor_parallel_classes[:3])}) "
                        f"in a {world_size}-rank job: per-rank widths are multiplied by {world_size}")
    layer = layer_class(model.descendants if model else signals.facts.module_instances)
    if layer:
        info.num_layers = layer[1]
        evidence.append(f"{layer[1]} distinct {code(layer[0])} instances")


def _vocabulary(signals: ModelSignals) -> _Vocabulary:
    linears = signals.weights("linear")
    largest_table = max(signals.weights("embedding"), key=lambda w: w.shape[0], default=None)
    vocab_rows = largest_table.shape[0] if largest_table and largest_table.shape[0] >= 1000 else None
    input_widths = {w.shape[1] for w in linears}
    # an output head: much wider than its input and never the input of another linear (an FFN
    # up-projection always has a down-projection that takes its width back)
    head_rows = max((w.shape[0] for w in linears if w.shape[0] >= 1000 and w.shape[0] > 4 * w.shape[1]
                     and w.shape[0] not in input_widths), default=None)
    return _Vocabulary(largest_table, vocab_rows, head_rows)


def _widths(signals: ModelSignals, info: ModelInfo, evidence: list[str], vocabulary: _Vocabulary) -> None:
    """Hidden, FFN and vocabulary sizes from the weights, and the layer count from repeated GEMM
    shapes when no module frame shows the layers."""
    linears = signals.weights("linear")
    tp = info.tensor_parallel or 1
    largest_table, vocab_rows, head_rows = vocabulary.largest_table, vocabulary.vocab_rows, vocabulary.head_rows
    if linears and not signals.is_cnn:
        body = [w for w in linears if w.shape[0] not in (vocab_rows, head_rows)] or linears
        info.hidden_size = _most_common([w.shape[1] for w in body])
        downs = [w.shape[1] for w in body if w.shape[0] == info.hidden_size and w.shape[1] > info.hidden_size]
        if downs:
            info.ffn_size = _most_common(downs)
        source = "GEMM weight shapes in `op_perf` (K x N)" if signals.facts.gemm_fallback else "`aten::linear` weights"
        evidence.append(f"hidden size {info.hidden_size}: most common input width of the {source}"
                        + (f"; FFN width {info.ffn_size} from the down projection" if info.ffn_size else ""))
        if largest_table and largest_table.shape[1] == info.hidden_size:
            evidence.append(f"embedding table {largest_table.shape[0]} x {largest_table.shape[1]} has the hidden width")
    vocab_per_rank = (vocab_rows or head_rows) if not signals.is_cnn else None
    if vocab_per_rank:
        info.vocab_size = vocab_per_rank * tp
        evidence.append(f"vocabulary {info.vocab_size}" + (f" ({vocab_per_rank} per rank x {tp})" if tp > 1 else "")
                        + (" from the embedding table" if vocab_rows else " from the output-head GEMM"))
    if info.num_layers is None and signals.facts.gemm_fallback and info.hidden_size:
        # no module frames: the rarest per-layer weight shape occurs once per layer
        shape_counts = Counter(w.shape for w in linears if info.hidden_size in w.shape and w.shape[0] != vocab_per_rank)
        if shape_counts:
            info.num_layers = min(shape_counts.values())
            evidence.append(f"{info.num_layers} layer(s) estimated from repeated GEMM weight shapes ("
                            + ", ".join(f"{k}x{n}: {c}" for (n, k), c in sorted(shape_counts.items())) + ")")


def _attention_and_experts(signals: ModelSignals, info: ModelInfo, evidence: list[str]) -> None:
    attention = signals.attention
    tp = info.tensor_parallel or 1
    if attention:
        info.num_heads = attention["heads"] * tp
        info.num_kv_heads = attention["kv_heads"] * tp
        info.head_dim = attention["head_dim"]
        evidence.append(f"{code(attention['op'])}: {attention['heads']} query / {attention['kv_heads']} key-value heads"
                        + (" per rank" if tp > 1 else "") + f", head dim {attention['head_dim']}"
                        + ("" if attention["causal"] is None else f", causal={str(attention['causal']).lower()}"))
    if not signals.is_moe:
        return
    moe_classes = signals.moe_classes
    routers = [w.shape[0] for w in signals.weights("linear") if info.hidden_size and w.shape[1] == info.hidden_size
               and 8 <= w.shape[0] < info.hidden_size and (w.shape[0] & (w.shape[0] - 1)) == 0]
    if routers and moe_classes:
        info.num_experts = _most_common(routers)
        evidence.append(f"router GEMM {info.hidden_size} -> {info.num_experts} inside the MoE layer: "
                        f"{info.num_experts} experts")
    kernel_time = signals.kernels.time_us_by_type
    evidence.append("mixture-of-experts: " + ", ".join(
        ([f"module {code(moe_classes[0])}"] if moe_classes else [])
        + ([f"{signals.op_counts['moe_ops']} MoE ops"] if signals.op_counts["moe_ops"] else [])
        + ([f"MoE kernels {kernel_time['moe'] / 1000:.3f} ms"] if "moe" in kernel_time else [])))


def _parameters(signals: ModelSignals, info: ModelInfo, evidence: list[str], vocabulary: _Vocabulary) -> None:
    linears = signals.weights("linear")
    if not (linears or signals.weights("conv")) or (info.tensor_parallel or 1) != 1 or signals.is_moe:
        return
    largest_table, vocab_rows = vocabulary.largest_table, vocabulary.vocab_rows
    tied = next((w for w in linears if largest_table and vocab_rows and w.shape == largest_table.shape), None)
    # a head with the embedding table's shape shares its weight (tied): only its bias is new
    weights = signals.facts.weights
    info.parameter_estimate = sum((w.shape[0] if w.bias else 0) if w is tied else w.params for w in weights)
    how = "one weight per module instance" if signals.facts.weights_per_instance else "each weight op counted once"
    evidence.append(f"{param_text(info.parameter_estimate)[1:]} in {len(weights)} weight tensors "
                    f"({how}; normalization parameters not counted"
                    + ("; output head tied to the embedding table" if tied else "") + ")")


def _checkpoint(db: duckdb.DuckDBPyConnection, signals: ModelSignals, info: ModelInfo, evidence: list[str]) -> None:
    """The published checkpoint: a ResNet's depth from its blocks, else the configurations seed."""
    blocks_basic = signals.facts.module_instances.get("BasicBlock", 0)
    blocks_bottleneck = signals.facts.module_instances.get("Bottleneck", 0)
    if info.model_family == "ResNet" and (blocks_basic or blocks_bottleneck):
        depth = 2 + 2 * blocks_basic if blocks_basic else 2 + 3 * blocks_bottleneck
        info.model_name = f"ResNet-{depth}"
        info.num_layers = depth
        evidence.append(f"{blocks_basic or blocks_bottleneck} {code('BasicBlock' if blocks_basic else 'Bottleneck')} "
                        f"instances: {depth} weight layers deep")
    elif info.hidden_size and info.num_layers:
        config = checkpoint_of(db, info)
        if config:
            name, hidden, layers, ffn, vocab = config
            info.model_name = name
            evidence.append(f"hidden {hidden}, {layers} layers"
                            + (f", FFN {ffn}" if ffn and info.ffn_size else "")
                            + (f", vocabulary {vocab}" if vocab and info.vocab_size else "")
                            + f" match the published {name} configuration")


def _describe_pipeline(signals: ModelSignals, info: ModelInfo) -> None:
    model = signals.model
    components = info_components(signals.components)
    info.components = components
    if signals.is_pipeline and model is not None:
        info.model_name = f"{info.model_name or model.module_class} pipeline"
        info.is_pipeline = True
        if signals.kind in _DENOISER_KINDS:
            # the denoiser runs once per denoising step; the text encoders and the VAE are its parts
            main = components[0]
            info.architecture = (f"Diffusion pipeline of {len(components)} models: the denoiser {main.module_class} "
                                 f"(x{main.calls}, one call per denoising step, {main.kernel_time_percent:.0f} % of "
                                 f"their GPU time) is a {info.architecture}; its parts: "
                                 + ", ".join(component_text(c) for c in components[1:]))
            return
        info.architecture = (f"Pipeline of {len(components)} models ("
                             + ", ".join(component_text(c) for c in components) + f"); the GPU time "
                             f"goes to {model.module_class}: " + info.architecture)


def _confidence(signals: ModelSignals, info: ModelInfo, base: str | None) -> None:
    named = signals.family is not None or signals.model is not None  # a family rule, or the model's own class
    if named and (info.num_layers or info.parameter_estimate):
        info.confidence = "high"
    elif named or (base and (signals.weights("linear") or signals.weights("conv") or signals.attention)):
        info.confidence = "medium"
    else:
        info.confidence = "low"


def _engine(db: duckdb.DuckDBPyConnection, trace_id: str, info: ModelInfo, evidence: list[str]) -> None:
    """The engine that runs the model, as the trace names it (workload_facts, from seeds/serving_engine_rules.csv)."""
    found = db.execute("select serving_engine, serving_engine_evidence from workload_facts where trace_id = ?",
                       [trace_id]).fetchone()
    if found and found[0]:
        info.serving_engine = found[0]
        evidence.append(f"run by {found[0]}: the trace shows {code(found[1])}")


def identify_model(db: duckdb.DuckDBPyConnection, trace_id: str) -> ModelInfo:
    """Model family, architecture, scale and precision of one trace, from the warehouse alone."""
    evidence: list[str] = []
    sql: list[str] = []
    signals = read_signals(db, trace_id, sql)
    info = ModelInfo()
    _name_model(signals, info, evidence)
    vocabulary = _vocabulary(signals)
    _widths(signals, info, evidence, vocabulary)
    _attention_and_experts(signals, info, evidence)
    _parameters(signals, info, evidence, vocabulary)
    base = describe_architecture(signals, info, evidence, read_is_compiled(db, trace_id))
    _checkpoint(db, signals, info, evidence)
    _describe_pipeline(signals, info)
    info.scale = scale_text(info, signals.weights("conv"), signals.weights("linear"), signals.is_cnn)
    info.precision = precision_of(db, trace_id, sql, evidence)
    _confidence(signals, info, base)
    _engine(db, trace_id, info, evidence)
    if not signals.op_counts["cpu_ops"]:
        evidence.append("no CPU ops in the trace (GPU-only): module names, shapes and parameters are not visible; "
                        "architecture and precision come from kernel names")
    info.model = info.model_name or info.model_family
    info.evidence = evidence
    info.evidence_sql = sql
    return info
