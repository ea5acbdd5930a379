"""The agents: which analyzer, which findings template and which spec each one has."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

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


def _agent(analyzer: ModuleType, template: str) -> AgentDefinition:
    """An agent as its analyzer module declares it (AGENT_NAME, TIER, DISPLAY_NAME, analyze)."""
    return AgentDefinition(analyzer.AGENT_NAME, analyzer.TIER, analyzer.DISPLAY_NAME, template, analyzer.analyze)


# The one list of agents: their names, tiers and display names are their analyzers' own.
SYSTEM_AGENTS = tuple(_agent(analyzer, f"{analyzer.AGENT_NAME}.md.j2") for analyzer in (cpu_idle, multi_kernel, kernel_fusion))
COMPUTE_AGENTS = tuple(_agent(analyzer, "compute.md.j2")
                       for analyzer in (gemm, sdpa, elementwise, reduce, norm, convolution, moe, triton, generic))

# Kernel fusion runs first so that ops it covers get no kernel-tuning finding (SPEC §5).
FUSION_AGENT = "kernel_fusion"
# Its metrics are written beside the findings (category_data/multi_kernel_data.json).
MULTI_KERNEL_AGENT = "multi_kernel"


def by_name(name: str) -> AgentDefinition:
    for definition in SYSTEM_AGENTS + COMPUTE_AGENTS:
        if definition.name == name:
            return definition
    raise KeyError(name)
