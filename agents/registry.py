"""The agents: which analyzer, which findings template and which spec each one has."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from analyzers.contracts import Tier

SPECS_DIR = Path(__file__).parent / "specs"


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    tier: Tier
    display_name: str
    template: str

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(f"analyzers.{self.name}")

    @property
    def spec_path(self) -> Path:
        return SPECS_DIR / f"{self.name}.md"

    def op_categories(self) -> tuple[str, ...] | None:
        """The op categories the agent analyzes; None for the generic agent (the rest)."""
        return getattr(self.module, "OP_CATEGORIES", None)


SYSTEM_AGENTS = (
    AgentDefinition("cpu_idle", "system", "CPU / idle time", "cpu_idle.md.j2"),
    AgentDefinition("multi_kernel", "system", "Memory copies and collectives", "multi_kernel.md.j2"),
    AgentDefinition("kernel_fusion", "system", "Kernel fusion", "kernel_fusion.md.j2"),
)

COMPUTE_AGENTS = (
    AgentDefinition("gemm", "compute", "GEMM", "compute.md.j2"),
    AgentDefinition("sdpa", "compute", "Attention (SDPA)", "compute.md.j2"),
    AgentDefinition("elementwise", "compute", "Elementwise", "compute.md.j2"),
    AgentDefinition("reduce", "compute", "Reduce", "compute.md.j2"),
    AgentDefinition("norm", "compute", "Normalization", "compute.md.j2"),
    AgentDefinition("convolution", "compute", "Convolution", "compute.md.j2"),
    AgentDefinition("moe", "compute", "Mixture of experts", "compute.md.j2"),
    AgentDefinition("triton", "compute", "Triton (compiled)", "compute.md.j2"),
    AgentDefinition("generic", "compute", "Other ops", "compute.md.j2"),
)

# Kernel fusion runs first so that ops it covers get no kernel-tuning finding (SPEC §5).
FUSION_AGENT = "kernel_fusion"


def by_name(name: str) -> AgentDefinition:
    for definition in SYSTEM_AGENTS + COMPUTE_AGENTS:
        if definition.name == name:
            return definition
    raise KeyError(name)
