"""The jinja2 settings every TraceLake template (agent findings, analysis.md, regression
reports, the dashboard) is written for."""

from __future__ import annotations

from pathlib import Path

import jinja2

from tracelake.core.markdown_text import code, code_cell, fenced, finalize, text


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
    (core.markdown_text.finalize) unless it already is markdown, so a template cannot let a
    trace string through as markup. `code`, `code_cell` and `fenced` print a value as code.
    Autoescape is on only so that macros return escaped text; the escaping is finalize's."""
    environment = template_environment(folder)
    environment.autoescape = True
    environment.finalize = finalize
    # compiled code depends on these settings, and the cache key does not: a cache of its own
    environment.bytecode_cache = jinja2.FileSystemBytecodeCache(pattern="__tracelake_markdown_%s.cache")
    environment.filters.update(text=text, code=code, code_cell=code_cell, fenced=fenced)
    return environment
