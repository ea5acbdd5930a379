"""Trace strings as literal markdown text: op, kernel, module, file and device names, shapes and
args land in a report as data, never as markup.

On a CommonMark/GFM renderer (GitHub, VS Code, markdown-it) a trace-supplied string must show as
the characters it holds: no raw HTML (`<script>`, `<img onerror=...>`, `<c10::Half>`, which is an
autolink), no table broken by a `|` or a newline, no code span ended early by a backtick, no
emphasis, link, strikethrough or math started by `*`, `_`, `[`, `~` or `$`. The helpers escape
only what a renderer would read as markup, so the raw markdown of an ordinary name stays as it was
(`aten::_foo [1x2]` is left alone):

    text(value)          literal text for prose, headings, list items and table cells
    code(value)          an inline code span; code_cell(value) the same inside a GFM table cell
    fenced(text, info)   a fenced code block whose fence the content cannot close
    TraceStrings         an agent result's trace strings, escaped where an analyzer wrote them
                         into its own markdown (insights, details, notes)
    safe_markdown(md)    markdown written by an analyzer or an LLM, with every raw HTML tag, link,
                         stray backtick and unclosed fence neutralized

Templates escape every interpolated value by themselves: `finalize` (installed by
core.templates.markdown_environment) passes each `{{ }}` value through `text`, except values that
already are markdown (`Markdown`, what the helpers return), which pass unchanged.

Trace text also never spells the markers the report checker (reports.analysis_validation) reads as
leftovers or P-item references (`TODO`, `nan`, `inf`, `None`, `P3`): their first letter becomes a
character reference, which renders the same. NUL becomes U+FFFD, as CommonMark does, so no trace
string can hold a token built with it (reports.report_inputs.PLOT_PENDING).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from tracelake.core import kernel_names

# clean, one_line and EMPTY live in core.text_format, sql_literal in core.sql_text; they are
# importable from here too, for the modules that still import them from this one
from tracelake.core.sql_text import sql_literal as sql_literal
from tracelake.core.text_format import EMPTY, clean, one_line

_PUNCTUATION = frozenset(string.punctuation)
# '<' that may open raw HTML or an autolink: a tag name (followed by space, '/' or '>'), a closing
# tag, a comment / declaration / processing instruction, a URI scheme or an e-mail address
_HTML_START = re.compile(
    r"<(?:[A-Za-z][A-Za-z0-9-]*(?=[\s/>]|$)|/[A-Za-z]|[!?]|[A-Za-z][A-Za-z0-9+.-]{1,31}:"
    r"|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@)")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{0,31});")
# what reports.analysis_validation.validate_analysis reads as a leftover placeholder or a P-item reference
REPORT_MARKERS = re.compile(r"\b(?:TODO|(?i:nan)|inf|Infinity|None)\b|(?<![\w/.-])P\d+(?!\w)")
_BLOCK_HEADING = re.compile(r"#{1,6}(?=\s|$)")
_BLOCK_RULE = re.compile(r"([-=_*])(?:\s*\1)*\s*")  # thematic break or setext underline
_BLOCK_ORDERED = re.compile(r"\d{1,9}([.)])(?=\s|$)")
_BACKTICKS = re.compile(r"`+")


class Markdown(str):
    """Text that already is markdown (escaped trace text, or ours): templates print it as is."""

    __slots__ = ()

    def __html__(self) -> Markdown:  # jinja2 / markupsafe: already escaped
        return self


def _is_space(char: str) -> bool:
    return char.isspace()


def _is_punctuation(char: str) -> bool:
    return char in _PUNCTUATION or unicodedata.category(char)[0] in "PS"


def _flanking(before: str, after: str) -> tuple[bool, bool]:
    """CommonMark: (left-flanking, right-flanking) of a delimiter run between these characters."""
    left = not _is_space(after) and (not _is_punctuation(after) or _is_space(before) or _is_punctuation(before))
    right = not _is_space(before) and (not _is_punctuation(before) or _is_space(after) or _is_punctuation(after))
    return left, right


def _closing_runs(text: str, strict: bool) -> set[int]:
    """Positions of the '_' and '~' runs to escape: those that could close emphasis (or
    strikethrough) opened earlier in the value, or with `strict` every run that could close at all
    (the value then cannot pair with a neighbour either). Beyond the value the worst case is assumed."""
    positions: set[int] = set()
    opened: set[str] = set()
    for run in re.finditer(r"_+|~+", text):
        start, end, char = run.start(), run.end(), run.group(0)[0]
        after = text[end] if end < len(text) else " "
        left, right = _flanking(text[start - 1] if start else "a", after)  # for closing
        can_close = right if char == "~" else right and (not left or _is_punctuation(after))
        before = text[start - 1] if start else " "
        left, right = _flanking(before, text[end] if end < len(text) else "a")  # for opening
        can_open = left if char == "~" else left and (not right or _is_punctuation(before))
        if can_close and (strict or char in opened):
            positions.update(range(start, end))
        elif can_open:
            opened.add(char)
    return positions


def _block_start(text: str) -> int | None:
    """The character to escape so that `text` at the start of a line opens no block (heading,
    quote, list item, thematic break, setext underline, fence, task box)."""
    if not text:
        return None
    if text[0] in ">[" or text.startswith("~~~") or _BLOCK_HEADING.match(text) or _BLOCK_RULE.fullmatch(text):
        return 0
    if text[0] in "-+" and (len(text) == 1 or text[1].isspace()):
        return 0
    ordered = _BLOCK_ORDERED.match(text)
    return ordered.start(1) if ordered else None


def text(value: Any, strict: bool = False) -> Markdown:
    """`value` as literal text anywhere a markdown inline may stand: prose, a heading, a list item
    or a GFM table cell (newlines become spaces, `|` is escaped). `_` and `~` are escaped where they
    could pair inside the value; `strict` also where they could pair with a neighbour (for names in
    running text; `aten::copy_` alone stays as it is). A leading or trailing run of whitespace
    stays one space (", " between two values)."""
    raw = clean(value)
    source = " ".join(raw.split())
    if not source:
        return Markdown("")
    lead = " " if raw[0].isspace() else ""
    trail = " " if raw[-1].isspace() else ""
    markers = {m.start() for m in REPORT_MARKERS.finditer(source)}
    closers = _closing_runs(source, strict)
    block = _block_start(source)
    last = len(source) - 1
    out: list[str] = []
    for i, char in enumerate(source):
        before = source[i - 1] if i else ""
        after = source[i + 1] if i < last else ""
        if i in markers:
            out.append(f"&#{ord(char)};")
        elif char == "\\":
            out.append("\\\\" if after == "" or after in _PUNCTUATION else "\\")  # a trailing one too
        elif char in "`*|$" or i in closers or i == block:
            out.append("\\" + char)
        elif char == "]" and (after in ("", "(", "[")):
            out.append("\\]")
        elif char == "<" and _HTML_START.match(source, i):
            out.append("&lt;")
        elif char == "&" and _ENTITY.match(source, i):
            out.append("&amp;")
        elif char in "{%" and (before == "{" or (i == 0 and char == "{")):
            out.append("\\" + char)
        else:
            out.append(char)
    return Markdown(lead + "".join(out) + trail)


def _longest_backtick_run(text: str) -> int:
    return max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)


def _code_span(value: Any, in_table: bool) -> Markdown:
    content = one_line(value)
    if not content:
        return Markdown(EMPTY)
    if in_table:
        content = content.replace("|", "\\|")  # GFM reads \| as | inside a cell's code span too
    fence = "`" * (_longest_backtick_run(content) + 1)
    pad = " " if content[0] == "`" or content[-1] == "`" else ""  # CommonMark strips one space a side
    return Markdown(f"{fence}{pad}{content}{pad}{fence}")


def code(value: Any) -> Markdown:
    """`value` as one inline code span, shown literally (outside a table cell)."""
    return _code_span(value, in_table=False)


def code_cell(value: Any) -> Markdown:
    """`value` as one inline code span inside a GFM table cell."""
    return _code_span(value, in_table=True)


def fenced(content: Any, info: str = "") -> Markdown:
    """`content` as a fenced code block: the fence is longer than any backtick run inside."""
    body = clean(content).replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    fence = "`" * max(3, _longest_backtick_run(body) + 1)
    return Markdown(f"{fence}{info}\n{body}\n{fence}")


def finalize(value: Any) -> Any:
    """The templates' finalize: every `{{ }}` value is literal text unless it already is markdown.
    Numbers and None print as they are, so the report checker still sees a missing number."""
    if hasattr(value, "__html__"):
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return Markdown(str(value))
    return text(value)


# ---- markdown written by an analyzer or an LLM -------------------------------------------------------

_PLACEHOLDER = re.compile("\x00(\\d+)\x00")  # a trace string inside analyzer markdown (NUL: clean() removes it)
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})\s*$")
_DELIMITER_ROW = re.compile(r" {0,3}\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_CELL_SEPARATOR = re.compile(r"(?<!\\)(?:\\\\)*\|")  # a '|' after an even number of backslashes


def _fill(text: str, values: list[str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[int(m.group(1))], text)


def _code_spans(segment: str) -> Iterator[tuple[str, int, int, int]]:
    """CommonMark backtick matching on one line: ("code", start, end, fence length) per code span and
    ("stray", start, end, 0) per backtick run no equal run closes."""
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "\\":
            i += 2
            continue
        if char != "`":
            i += 1
            continue
        run_end = i
        while run_end < n and segment[run_end] == "`":
            run_end += 1
        run = run_end - i
        closing = next((m for m in _BACKTICKS.finditer(segment, run_end) if len(m.group(0)) == run), None)
        if closing is None:
            yield "stray", i, run_end, 0
            i = run_end
        else:
            yield "code", i, closing.end(), run
            i = closing.end()


def _neutralized_prose(piece: str, values: list[str]) -> str:
    """Analyzer prose outside code: raw HTML and autolinks, links and images, math and `{{` / `{%`
    made literal; trace strings (placeholders) escaped as text."""
    out: list[str] = []
    i, n = 0, len(piece)
    while i < n:
        char = piece[i]
        placeholder = _PLACEHOLDER.match(piece, i) if char == "\x00" else None
        if placeholder:
            out.append(text(values[int(placeholder.group(1))], strict=True))
            i = placeholder.end()
            continue
        after = piece[i + 1] if i + 1 < n else ""
        if char == "\\":
            out.append(piece[i:i + 2])
            i += 2
            continue
        if char == "<" and (after == "\x00" or _HTML_START.match(piece, i)):
            out.append("&lt;")
        elif char == "]" and after in ("(", "\x00"):
            out.append("\\]")
        elif char == "$" or (char in "{%" and i and piece[i - 1] == "{"):
            out.append("\\" + char)
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _safe_inline(segment: str, values: list[str], in_table: bool) -> str:
    out: list[str] = []
    position = 0
    for kind, start, end, run in _code_spans(segment):
        out.append(_neutralized_prose(segment[position:start], values))
        if kind == "stray":
            out.append("\\`" * (end - start))
        else:
            content = segment[start + run:end - run]
            if len(content) > 2 and content[0] == content[-1] == " " and content.strip(" "):
                content = content[1:-1]
            if in_table:
                content = content.replace("\\|", "|")
            out.append(_code_span(_fill(content, values), in_table))
        position = end
    out.append(_neutralized_prose(segment[position:], values))
    return "".join(out)


def _safe_markdown(markdown: str, values: list[str]) -> Markdown:
    """`markdown` (cleaned; NUL-delimited placeholders stand for values[i]) made safe."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    in_fence = [False] * len(lines)
    fence: str | None = None
    for number, line in enumerate(lines):
        if fence is not None:
            in_fence[number] = True
            closing = _FENCE_CLOSE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)  # only at the margin: an indented one may sit in a list item
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            in_fence[number] = True
    table = [False] * len(lines)
    for number in range(len(lines) - 1):
        if (not in_fence[number] and not in_fence[number + 1] and lines[number].strip() and not table[number]
                and _DELIMITER_ROW.match(lines[number + 1]) and "|" in lines[number] + lines[number + 1]):
            row = number
            while row < len(lines) and lines[row].strip() and not in_fence[row]:
                table[row] = True
                row += 1
    out = []
    for number, line in enumerate(lines):
        if in_fence[number]:
            out.append(_fill(line, values))
        elif table[number]:
            cells, position = [], 0
            for separator in _CELL_SEPARATOR.finditer(line):
                cells.append(_safe_inline(line[position:separator.end() - 1], values, in_table=True))
                cells.append(line[separator.start():separator.end()])
                position = separator.end()
            cells.append(_safe_inline(line[position:], values, in_table=True))
            out.append("".join(cells))
        else:
            out.append(_safe_inline(line, values, in_table=False))
    if fence is not None:  # a fence left open would swallow the rest of the report
        out[-1:] = [fence] if out[-1] == "" else [out[-1], fence]
    return Markdown("\n".join(out))


def safe_markdown(markdown: str) -> Markdown:
    """Markdown from an analyzer or an LLM, keeping its own formatting (emphasis, tables, lists, code)
    but with no raw HTML, autolink, link or image, math, `{{` / `{%`, stray backtick or unclosed fence
    left. Applied to text that is already ours it changes nothing."""
    return _safe_markdown(clean(markdown), [])


def _strings(value: Any, skip_keys: frozenset[str]) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in skip_keys:
                yield from _strings(key, skip_keys)
                yield from _strings(item, skip_keys)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item, skip_keys)


class TraceStrings:
    """The strings of an agent result that came from the trace (names, shapes, args in its metrics,
    a finding's evidence and operations). An analyzer writes them into its own markdown (The GEMM
    op `{name}` takes ...); `escape_in` finds those that would not read as themselves
    there, whole or clipped with "...", and escapes each for where it stands: a code span, a table
    cell or prose. What is left gets the safe_markdown treatment."""

    # metric fields that hold the analyzer's own markdown sentences, not trace strings
    MARKDOWN_KEYS = frozenset({"notes"})
    _PREFIX = 12  # characters a clipped occurrence must keep

    def __init__(self, strings: Iterable[str]) -> None:
        self._strings = {s for s in strings if s}
        self._hazardous: dict[str, bool] = {}
        # full kernel name -> the short form escape_in wrote for it (core.kernel_names); a report
        # lists these in its "Kernel names" appendix
        self.shortened: dict[str, str] = {}

    @classmethod
    def of(cls, *values: Any) -> TraceStrings:
        """Every string inside `values` (dicts, lists, strings), but the analyzer's own sentences."""
        return cls(s for value in values for s in _strings(value, cls.MARKDOWN_KEYS))

    def _present(self, markdown: str) -> list[str]:
        """The strings that stand in `markdown` (by their first characters) and need escaping,
        longest first."""
        found = []
        for candidate in self._strings:
            prefix = candidate[: self._PREFIX]
            if prefix in markdown or ("|" in prefix and prefix.replace("|", "\\|") in markdown):
                hazardous = self._hazardous.get(candidate)
                if hazardous is None:
                    hazardous = self._hazardous[candidate] = (text(candidate, strict=True) != candidate
                                                              or kernel_names.shortens(candidate))
                if hazardous:
                    found.append(candidate)
        return sorted(found, key=len, reverse=True)

    def _match(self, markdown: str, start: int, candidates: list[str]) -> tuple[int, str] | None:
        """(end, raw text) of the longest candidate at `start`: whole, or clipped before '...'."""
        best: tuple[int, str] | None = None
        for candidate in candidates:
            i, j = start, 0
            while j < len(candidate) and i < len(markdown):
                if markdown[i] == candidate[j]:
                    i, j = i + 1, j + 1
                elif candidate[j] == "|" and markdown.startswith("\\|", i):  # escaped for a table
                    i, j = i + 2, j + 1
                else:
                    break
            if j == len(candidate):
                return i, candidate  # longest first: the first whole match is the best one
            if j >= self._PREFIX and markdown.startswith("...", i) and (best is None or i + 3 > best[0]):
                best = (i + 3, candidate[:j] + "...")
        return best

    def _short(self, raw: str) -> str:
        """A kernel name as prose shows it (core.kernel_names), recorded when it is shortened."""
        if not kernel_names.shortens(raw):
            return raw
        short = kernel_names.short_kernel_name(raw)
        self.shortened[raw] = short
        return short

    def escape_in(self, markdown: str | None) -> Markdown:
        """`markdown` written by an analyzer, with these trace strings escaped and the rest made safe."""
        source = clean(markdown or "")
        candidates = self._present(source)
        values: list[str] = []
        if candidates:
            pattern = re.compile("|".join(sorted({
                "".join("\\\\?\\|" if c == "|" else re.escape(c) for c in candidate[: self._PREFIX])
                for candidate in candidates}, key=len, reverse=True)))
            pieces, position = [], 0
            search = pattern.search(source)
            while search:
                found = self._match(source, search.start(), candidates)
                if found is None:
                    search = pattern.search(source, search.start() + 1)
                    continue
                end, raw = found
                pieces += [source[position:search.start()], f"\x00{len(values)}\x00"]
                values.append(self._short(raw))
                position = end
                search = pattern.search(source, end)
            pieces.append(source[position:])
            source = "".join(pieces)
        return _safe_markdown(source, values)


# ---- reading a rendered report ------------------------------------------------------------------------

def blank_code(markdown: str) -> str:
    """`markdown` with its fenced code blocks and inline code spans blanked (spaces, newlines kept),
    so that offsets still match: what is left is prose, tables and headings."""
    lines = markdown.split("\n")
    out = []
    fence: str | None = None
    for line in lines:
        if fence is not None:
            closing = _FENCE_CLOSE.match(line)
            if closing and closing.group(1)[0] == fence[0] and len(closing.group(1)) >= len(fence):
                fence = None
            out.append(" " * len(line))
            continue
        opening = _FENCE_OPEN.match(line)
        if opening and not (opening.group(1)[0] == "`" and "`" in opening.group(2)):
            fence = opening.group(1)
            out.append(" " * len(line))
            continue
        chars = list(line)
        for kind, start, end, _ in _code_spans(line):
            if kind == "code":
                chars[start:end] = " " * (end - start)
        out.append("".join(chars))
    return "\n".join(out)
