"""What model identification returns: the model of one trace as the warehouse shows it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

UNKNOWN = "Cannot be inferred from trace"


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
    serving_engine: str | None = None  # the engine the trace shows running it (workload_facts.serving_engine)

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
