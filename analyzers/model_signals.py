"""Everything model identification decides from, read once from the warehouse: the trace's models
and module classes, weights, attention shape, op and kernel mix, world size and the family rule its
classes match; and what they show (attention, convolutions, experts, tensor parallelism)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import duckdb

from tracelake.analyzers import settings
from tracelake.analyzers.model_facts import (
    KernelMix,
    ModuleFacts,
    RootModule,
    Weight,
    read_attention,
    read_kernel_mix,
    read_module_facts,
    read_op_kinds,
    read_roots,
    read_weights,
    read_world_size,
)
from tracelake.analyzers.model_family import family_of, model_components

_TENSOR_PARALLEL_CLASS = re.compile(
    r"(ColumnParallelLinear|RowParallelLinear|QKVParallelLinear|VocabParallelEmbedding|ParallelLMHead)")
_MOE_CLASS = re.compile(r"(?i)(moe|experts?$|sparse.*block)")
# A decoder's classes: an encoder-decoder family's model without any (T5EncoderModel) is its encoder alone.
_DECODER_CLASS = re.compile(r"(?i)(decoder|crossattention)")


@dataclass
class ModelSignals:
    facts: ModuleFacts
    components: list[RootModule]  # the trace's models, most GPU kernel time first
    attention: dict[str, Any]  # model_facts.read_attention: op, heads, kv_heads, head_dim, causal
    op_counts: dict[str, int]  # model_facts.OP_KINDS -> cpu ops of that kind
    kernels: KernelMix
    world_size: int | None
    family: tuple[str, str, str] | None  # (family, kind, matched class) of the family rules seed

    @property
    def model(self) -> RootModule | None:
        """The model where the GPU time goes."""
        return self.components[0] if self.components else None

    @property
    def is_pipeline(self) -> bool:
        return len(self.components) >= 2

    @property
    def kind(self) -> str | None:
        return self.family[1] if self.family else None

    @property
    def classes(self) -> list[str]:
        return sorted(set(self.facts.module_instances) | set(self.facts.module_calls))

    def weights(self, kind: str) -> list[Weight]:
        return [w for w in self.facts.weights if w.kind == kind]

    @property
    def tensor_parallel_classes(self) -> list[str]:
        return [c for c in self.classes if _TENSOR_PARALLEL_CLASS.search(c)]

    @property
    def tensor_parallel(self) -> int | None:
        """The ranks weights are sharded over: tensor-parallel modules in a multi-rank job."""
        if self.tensor_parallel_classes and self.world_size and self.world_size > 1:
            return self.world_size
        return None

    @property
    def has_attention(self) -> bool:
        kernel_time = self.kernels.time_us_by_type
        return bool(self.attention) or self.op_counts["attention_ops"] > 0 or "attention" in kernel_time or (
            self.op_counts["bmm_ops"] > 0 and self.op_counts["softmax_ops"] > 0)

    @property
    def has_conv(self) -> bool:
        return bool(self.weights("conv")) or self.op_counts["conv_ops"] > 0 or "conv" in self.kernels.time_us_by_type

    @property
    def is_cnn(self) -> bool:
        return self.kind == "cnn" or (self.kind is None and self.has_conv and not self.has_attention)

    @property
    def conv_is_patch_embedding(self) -> bool:
        """The only convolution is a patch embedding: one weight shape (a ViT's or a DiT's patchify)."""
        shapes = {w.shape for w in self.weights("conv")}
        return 0 < len(shapes) <= settings.PATCH_EMBEDDING_CONV_SHAPES_MAX

    @property
    def moe_classes(self) -> list[str]:
        return [c for c in self.classes if _MOE_CLASS.search(c)]

    @property
    def is_moe(self) -> bool:
        return bool(self.moe_classes) or self.op_counts["moe_ops"] > 0 or "moe" in self.kernels.time_us_by_type


def read_signals(db: duckdb.DuckDBPyConnection, trace_id: str, sql: list[str]) -> ModelSignals:
    """The signals of one trace; each query that shows something is added to `sql` (in this order)."""
    facts = ModuleFacts()
    read_module_facts(db, trace_id, facts, sql)
    kernels = read_kernel_mix(db, trace_id, sql)
    components = model_components(db, facts, read_roots(db, trace_id, sql), sum(kernels.time_us_by_type.values()))
    # a pipeline's scale is its main model's: the weights of that component's calls only
    read_weights(db, trace_id, facts, sql, components[0] if len(components) >= 2 else None)
    attention = read_attention(db, trace_id, sql)
    op_counts = read_op_kinds(db, trace_id)
    world_size = read_world_size(db, trace_id)
    classes = sorted(set(facts.module_instances) | set(facts.module_calls))
    scope = components[0].scope_classes if components else classes
    family = family_of(db, facts, scope, sql)
    if family and family[1] == "encoder-decoder" and not any(_DECODER_CLASS.search(c) for c in scope):
        family = (family[0], "encoder", family[2])
    return ModelSignals(facts, components, attention, op_counts, kernels, world_size, family)
