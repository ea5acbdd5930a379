"""Render an agent's result into its findings markdown with the agent's jinja2 template."""

from __future__ import annotations

from pathlib import Path

import jinja2

from agents.registry import AgentDefinition
from analyzers.contracts import AgentResult, AnalysisContext

TEMPLATES = Path(__file__).parent / "templates"


def template_environment(folder: Path) -> jinja2.Environment:
    """The jinja2 settings every TraceLake template is written for. Compiled templates are cached
    on disk (jinja2's per-user cache folder, keyed by the template source), so a run does not pay
    for compiling them again."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        bytecode_cache=jinja2.FileSystemBytecodeCache(),
    )


_environment = template_environment(TEMPLATES)


def render_findings(definition: AgentDefinition, result: AgentResult, ctx: AnalysisContext) -> str:
    return _environment.get_template(definition.template).render(result=result, ctx=ctx, agent=definition)
