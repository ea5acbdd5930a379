"""Render an agent's result into its findings markdown with the agent's jinja2 template."""

from __future__ import annotations

from pathlib import Path

from agents.registry import AgentDefinition
from analyzers.contracts import AgentResult, AnalysisContext
from core.templates import markdown_environment
from core.markdown_text import TraceStrings

TEMPLATES = Path(__file__).parent / "templates"


_environment = markdown_environment(TEMPLATES)


def findings_view(result: AgentResult, ctx: AnalysisContext) -> AgentResult:
    """`result` with the markdown its analyzer wrote (each finding's insight, action and details,
    the metrics' notes) made safe, its trace strings escaped where they stand."""
    names = TraceStrings.of(result.metrics, [f.evidence for f in result.findings],
                            [f.operations for f in result.findings], ctx.fusion_flagged_ops)
    findings = [f.model_copy(update={field: names.escape_in(getattr(f, field))
                                     for field in ("insight", "action", "details")}) for f in result.findings]
    metrics = dict(result.metrics)
    if isinstance(metrics.get("notes"), list):
        metrics["notes"] = [names.escape_in(note) for note in metrics["notes"]]
    return result.model_copy(update={"findings": findings, "metrics": metrics})


def render_findings(definition: AgentDefinition, result: AgentResult, ctx: AnalysisContext) -> str:
    return _environment.get_template(definition.template).render(
        result=findings_view(result, ctx), ctx=ctx, agent=definition)
