"""The agents: which analyzer, which findings template and which spec each one has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from tracelake.analyzers import (
    convolution,
    cpu_idle,
    elementwise,
    gemm,
    generic,
    kernel_fusion,
    moe,
    multi_kernel,
    norm,
    reduce,
    sdpa,
    triton,
)
from tracelake.analyzers.contracts import AgentResult, AnalysisContext, Tier

Analyze = Callable[[duckdb.DuckDBPyConnection, AnalysisContext], AgentResult]

SPECS_DIR = Path(__file__).parent / "specs"


@dataclass(frozen=True)
class AgentDefinition:
    name: str
    tier: Tier
    display_name: str
    template: str
    analyze: Analyze

    @property
    def spec_path(self) -> Path:
        return SPECS_DIR / f"{self.name}.md"


SYSTEM_AGENTS = (
    AgentDefinition("cpu_idle", "system", "CPU / idle time", "cpu_idle.md.j2", cpu_idle.analyze),
    AgentDefinition("multi_kernel", "system", "Memory copies and collectives", "multi_kernel.md.j2", multi_kernel.analyze),
    AgentDefinition("kernel_fusion", "system", "Kernel fusion", "kernel_fusion.md.j2", kernel_fusion.analyze),
)

COMPUTE_AGENTS = (
    AgentDefinition("gemm", "compute", "GEMM", "compute.md.j2", gemm.analyze),
    AgentDefinition("sdpa", "compute", "Attention (SDPA)", "compute.md.j2", sdpa.analyze),
    AgentDefinition("elementwise", "compute", "Elementwise", "compute.md.j2", elementwise.analyze),
    AgentDefinition("reduce", "compute", "Reduce", "compute.md.j2", reduce.analyze),
    AgentDefinition("norm", "compute", "Normalization", "compute.md.j2", norm.analyze),
    AgentDefinition("convolution", "compute", "Convolution", "compute.md.j2", convolution.analyze),
    AgentDefinition("moe", "compute", "Mixture of experts", "compute.md.j2", moe.analyze),
    AgentDefinition("triton", "compute", "Triton (compiled)", "compute.md.j2", triton.analyze),
    AgentDefinition("generic", "compute", "Other ops", "compute.md.j2", generic.analyze),
)

# Kernel fusion runs first so that ops it covers get no kernel-tuning finding (SPEC §5).
FUSION_AGENT = "kernel_fusion"
# Its metrics are written beside the findings (category_data/multi_kernel_data.json).
MULTI_KERNEL_AGENT = "multi_kernel"


def by_name(name: str) -> AgentDefinition:
    for definition in SYSTEM_AGENTS + COMPUTE_AGENTS:
        if definition.name == name:
            return definition
    raise KeyError(name)
