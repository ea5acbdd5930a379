"""Typed reads of the agent results the pipeline acts on: each agent's metrics as its analyzer's
pydantic model, never a metric looked up by its name."""

from __future__ import annotations

from tracelake.agents.registry import FUSION_AGENT, MULTI_KERNEL_AGENT
from tracelake.analyzers.compute import ComputeMetrics
from tracelake.analyzers.contracts import AgentResult
from tracelake.analyzers.kernel_fusion import KernelFusionMetrics


def _completed(results: list[AgentResult], agent: str) -> AgentResult | None:
    return next((r for r in results if r.agent == agent and r.status == "OK"), None)


def fusion_metrics(results: list[AgentResult]) -> KernelFusionMetrics | None:
    """The kernel fusion agent's metrics, when it completed."""
    fusion = _completed(results, FUSION_AGENT)
    return KernelFusionMetrics.model_validate(fusion.metrics) if fusion is not None else None


def multi_kernel_result(results: list[AgentResult]) -> AgentResult | None:
    """The memcpy / collective agent's result, when it completed."""
    return _completed(results, MULTI_KERNEL_AGENT)


def compute_time_ms(results: list[AgentResult]) -> dict[str, float]:
    """Kernel time of each compute agent that completed, by agent."""
    return {r.agent: float(ComputeMetrics.model_validate(r.metrics).total_time_ms)
            for r in results if r.status == "OK"}
