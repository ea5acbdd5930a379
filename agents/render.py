"""Render an agent's result into its findings markdown with the agent's jinja2 template."""

from __future__ import annotations

from pathlib import Path

import jinja2

from agents.registry import AgentDefinition
from analyzers.contracts import AgentResult, AnalysisContext

TEMPLATES = Path(__file__).parent / "templates"
_environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def render_findings(definition: AgentDefinition, result: AgentResult, ctx: AnalysisContext) -> str:
    return _environment.get_template(definition.template).render(result=result, ctx=ctx, agent=definition)
