"""Render an agent's result into its findings markdown with the agent's jinja2 template."""

from __future__ import annotations

from pathlib import Path

import jinja2

from agents.registry import AgentDefinition
from analyzers.contracts import AgentResult, AnalysisContext
from reports.markdown_text import TraceStrings, code, code_cell, fenced, finalize, text

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


def markdown_environment(folder: Path) -> jinja2.Environment:
    """template_environment for markdown: every `{{ }}` value is escaped as literal text
    (reports.markdown_text.finalize) unless it already is markdown, so a template cannot let a
    trace string through as markup. `code`, `code_cell` and `fenced` print a value as code.
    Autoescape is on only so that macros return escaped text; the escaping is finalize's."""
    environment = template_environment(folder)
    environment.autoescape = True
    environment.finalize = finalize
    # compiled code depends on these settings, and the cache key does not: a cache of its own
    environment.bytecode_cache = jinja2.FileSystemBytecodeCache(pattern="__tracelake_markdown_%s.cache")
    environment.filters.update(text=text, code=code, code_cell=code_cell, fenced=fenced)
    return environment


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
