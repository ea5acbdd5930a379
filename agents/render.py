"""Render an agent's result into its findings markdown with the agent's jinja2 template."""

from __future__ import annotations

from pathlib import Path

from tracelake.agents.registry import AgentDefinition
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
from tracelake.core.kernel_names import short_kernel_name, shortens
from tracelake.core.markdown_text import TraceStrings, one_line
from tracelake.core.templates import markdown_environment

TEMPLATES = Path(__file__).parent / "templates"


def kernel_full_names(names: list[str | None], also: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(short, full) of the kernel names among `names` that a table shows short, with `also`
    (full -> short, what TraceStrings shortened in the analyzer's text), sorted by short name."""
    pairs = {one_line(n): short_kernel_name(one_line(n)) for n in names if n and shortens(one_line(n))}
    pairs.update(also or {})
    return sorted(((short, full) for full, short in pairs.items()), key=lambda pair: pair)


_environment = markdown_environment(TEMPLATES)


def kernel_name(name: str) -> str:
    """A kernel's (or a synthetic op's) name short; any other name as it is."""
    name = one_line(name)
    return short_kernel_name(name) if shortens(name) else name


_environment.filters.update(kernel_name=kernel_name)


def _view(result: AgentResult, ctx: AnalysisContext) -> tuple[AgentResult, TraceStrings]:
    """`result` with the markdown its analyzer wrote (each finding's insight, action and details,
    the metrics' notes) made safe, its trace strings escaped where they stand and its kernel names
    shortened (core.kernel_names); and those trace strings."""
    names = TraceStrings.of(result.metrics, [f.evidence for f in result.findings],
                            [f.operations for f in result.findings], ctx.fusion_flagged_ops)
    findings = [f.model_copy(update={field: names.escape_in(getattr(f, field))
                                     for field in ("insight", "action", "details")}) for f in result.findings]
    metrics = dict(result.metrics)
    if isinstance(metrics.get("notes"), list):
        metrics["notes"] = [names.escape_in(note) for note in metrics["notes"]]
    return result.model_copy(update={"findings": findings, "metrics": metrics}), names


def render_findings(definition: AgentDefinition, result: AgentResult, ctx: AnalysisContext) -> str:
    view, names = _view(result, ctx)
    tabled: list[str | None] = [op.get("name") for op in result.metrics.get("top_operations") or [] if isinstance(op, dict)]
    tabled += [op.get("name") for op in result.metrics.get("top_collectives") or [] if isinstance(op, dict)]
    return _environment.get_template(definition.template).render(
        result=view, ctx=ctx, agent=definition, kernel_pairs=kernel_full_names(tabled, names.shortened))
