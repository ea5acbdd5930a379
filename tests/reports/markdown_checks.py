"""Reading markdown the way a CommonMark/GFM renderer does (markdown-it-py, which rich depends on),
to check that trace strings in it stay literal text."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

from tracelake.core.kernel_names import is_kernel_name

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# the only raw HTML the templates write: the card, Detailed Analysis and SQL anchors and the findings' comments
OUR_HTML = re.compile(r'<a id="(?:detail-|sql-)?p\d+">|</a>|<!-- reasoning-candidate tier=\w+ rank=\d+ -->')
# the plot is ours: the file beside the report (or inline, where a test renders it so)
TAGS = re.compile(r"<script\b|<img\b(?! src=\"(perf_improvement\.png|data:image/png;base64,))", re.IGNORECASE)


def tokens(markdown: str) -> Iterator[Token]:
    """Every token of the parse, inline children included."""
    for token in RENDERER.parse(markdown):
        yield token
        yield from token.children or []


def raw_html(markdown: str) -> list[str]:
    """The raw HTML nodes a renderer would pass through, but the templates' own."""
    return [t.content.strip() for t in tokens(markdown)
            if t.type in ("html_block", "html_inline") and not OUR_HTML.fullmatch(t.content.strip())]


def visible_text(markdown: str) -> str:
    """What a reader sees: the rendered HTML without tags, whitespace runs as one space."""
    rendered = RENDERER.render(markdown)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", rendered)).split())


def prose_source(markdown: str) -> str:
    """The markdown source outside fenced code blocks and code spans, as the renderer splits it."""
    lines = markdown.split("\n")
    parts = []
    for token in RENDERER.parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            lines[token.map[0]:token.map[1]] = [""] * (token.map[1] - token.map[0])
        if token.type == "inline":
            source = token.content
            for child in token.children or []:
                if child.type == "code_inline":
                    for pad in ("", " "):
                        span = f"{child.markup}{pad}{child.content}{pad}{child.markup}"
                        if span in source:
                            source = source.replace(span, " ", 1)
                            break
            parts.append(source)
    return "\n".join(parts)


def broken_table_rows(markdown: str) -> list[str]:
    """Table rows whose cell count differs from their header's (a `|` or a newline from a name)."""
    lines = markdown.split("\n")
    broken = []
    for token in RENDERER.parse(markdown):
        if token.type != "table_open" or not token.map:
            continue
        rows = lines[token.map[0]:token.map[1]]
        counts = [len(re.split(r"(?<!\\)\|", row.strip().removeprefix("|").removesuffix("|"))) for row in rows]
        broken += [row for row, count in zip(rows, counts) if count != counts[0]]
    return broken


def markup_problems(markdown: str) -> list[str]:
    """What would let a trace string act as markup in `markdown`: raw HTML nodes, script or img
    tags in the rendered page or in the source outside code, broken table rows."""
    problems = [f"raw HTML node {node[:80]!r}" for node in raw_html(markdown)]
    if TAGS.search(RENDERER.render(markdown)):
        problems.append("a <script> or <img> tag in the rendered HTML")
    problems += [f"{m.group(0)!r} outside code in the source" for m in TAGS.finditer(prose_source(markdown))]
    problems += [f"broken table row {row[:80]!r}" for row in broken_table_rows(markdown)]
    return problems


def _inline_text(token: Token) -> str:
    rendered = RENDERER.renderer.renderInline(token.children or [], RENDERER.options, {})
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", rendered)).split())


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table as rows (header first) of cells' visible text."""
    found: list[list[list[str]]] = []
    row: list[str] | None = None
    for token in RENDERER.parse(markdown):
        if token.type == "table_open":
            found.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type == "inline" and row is not None:
            row.append(_inline_text(token))
        elif token.type == "tr_close" and row is not None:
            found[-1].append(row)
            row = None
    return found


# ---- what a reader of a real report must not meet (issue 13 item 8) --------------------------------

LEAKS = re.compile(r"\bNone\b|\bnan\b|unknown-bound|\ball %|\bbucket all\b|\(\)|\|[ \t]*\|")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def before_appendix(markdown: str) -> str:
    """The report up to its appendix (analysis.md's '## Appendix', an agent's '## Appendix: ...')."""
    return re.split(r"^## Appendix", markdown, maxsplit=1, flags=re.MULTILINE)[0]


def leaks(markdown: str) -> list[str]:
    """Missing facts printed as text ('None', 'nan', 'unknown-bound', an 'all %' bucket, an empty
    '()' or table cell) in the prose and tables before the appendix (code is names and SQL)."""
    prose = prose_source(before_appendix(markdown))
    prose += "\n" + "\n".join(line for line in before_appendix(markdown).splitlines() if line.startswith("|"))
    return sorted({m.group(0) for m in LEAKS.finditer(prose)})


def long_names(markdown: str, limit: int) -> list[str]:
    """Kernel names (code spans, in prose and table cells) before the appendix longer than `limit`."""
    head = blank_fences(before_appendix(markdown))
    spans = [m.group(2).strip().replace("\\|", "|") for line in head.splitlines() for m in _CODE_SPAN.finditer(line)]
    return [s for s in spans if len(s) > limit and is_kernel_name(s)]


def blank_fences(markdown: str) -> str:
    """`markdown` without its fenced code blocks."""
    return re.sub(r"^(`{3,}|~{3,}).*?^\1\s*$", "", markdown, flags=re.MULTILINE | re.DOTALL)


def card_ranks(markdown: str) -> list[int]:
    """The P numbers of analysis.md's cards, in the order a reader meets them."""
    return [int(m.group(1)) for m in re.finditer(r"^### P(\d+): ", markdown, re.MULTILINE)]
