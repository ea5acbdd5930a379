"""Checks of a rendered (or hand-edited) analysis.md against the priority data: the ``##`` sections
and their order, the title, leftover template placeholders, the P-item cards (one per ranked
finding, numbered by global rank) and the Executive Summary metric table."""

from __future__ import annotations

import re

from tracelake.analyzers.contracts import PriorityData
from tracelake.core.markdown_text import blank_code, one_line
from tracelake.reports.analysis_cards import finding_kind
from tracelake.reports.analysis_format import card_title
from tracelake.reports.report_inputs import PLOT_PENDING

SECTIONS = (
    "Executive Summary",
    "Warnings",
    "Compute Kernel Optimizations",
    "Kernel Fusion Opportunities (Experimental)",
    "System-Level Optimizations",
    "Detailed Analysis",
    "Appendix",
)
OPTIONAL_SECTIONS = frozenset({"Warnings"})
# Each P-item card stands in the section of its kind (reports/analysis_cards.finding_kind), in rank
# order there; the Executive Summary's table ranks them all.
CARDS_SECTION = {"compute": "Compute Kernel Optimizations", "fusion": "Kernel Fusion Opportunities (Experimental)",
                 "system": "System-Level Optimizations"}
METRIC_ROWS = ("Total Time", "Compute %", "Idle %", "Exposed Communication %", "Top Bottleneck Category")

_DATA_URI = re.compile(r"\(data:image/[a-z]+;base64,[A-Za-z0-9+/=\s]*\)")
_CARD = re.compile(r"^### P(\d+): (.*?)\s*$", re.MULTILINE)
_P_REFERENCE = re.compile(r"(?<![\w/.-])P(\d+)(?![\w])")
_TITLE_STANDALONE = re.compile(r"^# (?P<model>.+?) - (?P<platform>\S.*?) Standalone Analysis$")
_TITLE_COMPARATIVE = re.compile(r"^# (?P<model>.+?) - Comparative Analysis: (?P<p1>\S.*?) vs (?P<p2>\S.*?)$")
_PLACEHOLDERS = (
    (re.compile(r"\{\{"), "template expression '{{'"),
    (re.compile(r"\{%"), "template statement '{%'"),
    (re.compile(r"\bTODO\b"), "TODO"),
    (re.compile(r"<placeholder>", re.IGNORECASE), "<placeholder>"),
    (re.compile(r"\bNone\s*(%|ms\b)"), "'None %' / 'None ms' (a missing number)"),
    (re.compile(r"\bnan\b", re.IGNORECASE), "'nan' (a missing number)"),
    (re.compile(r"\b(?:inf|Infinity)\b"), "'inf' (a broken number)"),
)
# <Model>, <platform>, <Brief Title>, ...: angle-bracket words that are not HTML tags the report uses.
# These checks read the prose only (code blocks and spans hold names and SQL, shown literally), and
# trace text in prose never spells them: markdown_text.text writes '<' as '&lt;', '{{' as '{\{' and
# the first letter of TODO / nan / inf / None / P<n> as a character reference.
# A '<' right after a name is a C++ template argument list of a trace name (`CppNode<SplitLookupFunction_Op>`),
# which markdown_text.text leaves as is (it is no HTML start), not a placeholder.
_ANGLE_PLACEHOLDER = re.compile(
    r"(?<![\w:])<(?!/?(?:a|br|sub|sup|b|i|em|strong|details|summary|code|span)\b)[A-Za-z][A-Za-z _-]*>")


def _strip_images(markdown: str) -> str:
    return _DATA_URI.sub("(data:image)", markdown)


def _prose(markdown: str) -> str:
    """The text with code blocks, inline code and embedded images blanked (for marker scans)."""
    return blank_code(_strip_images(markdown))


def _sections(markdown: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of every ``##`` section outside code blocks."""
    prose = blank_code(markdown)
    heads = [(m.group(1).strip(), m.start()) for m in re.finditer(r"^## (?!#)(.+)$", prose, re.MULTILINE)]
    return [(name, start, heads[i + 1][1] if i + 1 < len(heads) else len(markdown))
            for i, (name, start) in enumerate(heads)]


def _check_sections(sections: list[tuple[str, int, int]]) -> list[str]:
    problems = []
    names = [name for name, _, _ in sections]
    for name in SECTIONS:
        if name not in OPTIONAL_SECTIONS and name not in names:
            problems.append(f"section '## {name}' is missing")
        if names.count(name) > 1:
            problems.append(f"section '## {name}' appears {names.count(name)} times")
    for name in names:
        if name not in SECTIONS:
            problems.append(f"unexpected section '## {name}'")
    known = [n for n in dict.fromkeys(names) if n in SECTIONS]
    if known != sorted(known, key=SECTIONS.index):
        problems.append("sections are out of order: " + ", ".join(known) + " (expected "
                        + ", ".join(n for n in SECTIONS if n in known) + ")")
    return problems


def _check_title(markdown: str, priority: PriorityData) -> list[str]:
    first = next((line for line in markdown.splitlines() if line.strip()), "")
    standalone = _TITLE_STANDALONE.match(first)
    comparative = _TITLE_COMPARATIVE.match(first)
    if not first.startswith("# "):
        return ["the report does not start with a '# ' title line"]
    if not (standalone or comparative):
        return [f"title {first!r} is neither '# <Model> - <Platform> Standalone Analysis' nor "
                "'# <Model> - Comparative Analysis: <Platform1> vs <Platform2>'"]
    if priority.comparison_scope == "comparative" and not comparative:
        return ["the priority data is comparative but the title is a standalone one"]
    if priority.comparison_scope == "standalone" and not standalone:
        return ["the priority data is standalone but the title is a comparative one"]
    return []


def _check_placeholders(markdown: str) -> list[str]:
    prose = _prose(markdown)
    problems = []
    if PLOT_PENDING in markdown:
        problems.append("leftover placeholder: the plot was never embedded")
    for pattern, label in _PLACEHOLDERS:
        hits = [m for m in pattern.finditer(prose)]
        if hits:
            line = prose.count("\n", 0, hits[0].start()) + 1
            problems.append(f"leftover placeholder {label}: {len(hits)} occurrence(s), first on line {line}")
    hits = list(_ANGLE_PLACEHOLDER.finditer(prose))
    if hits:
        problems.append("leftover placeholder(s) " + ", ".join(sorted({m.group(0) for m in hits})[:5]))
    return problems


def _check_markers(markdown: str, sections: list[tuple[str, int, int]], priority: PriorityData) -> list[str]:
    problems = []
    by_rank = {f.global_rank: f for f in priority.findings}
    cards = []  # (rank, title, offset) of every card heading outside code, its title as written
    for outside_code in _CARD.finditer(blank_code(markdown)):
        heading = _CARD.match(markdown, outside_code.start())
        if heading:
            cards.append((int(heading.group(1)), heading.group(2), heading.start()))
    seen: dict[int, int] = {}
    for rank, title, position in cards:
        seen[rank] = seen.get(rank, 0) + 1
        finding = by_rank.get(rank)
        if finding is None:
            problems.append(f"card P{rank} ({title!r}) matches no finding with global rank {rank}")
            continue
        expected_title = card_title(finding)
        if expected_title != title:
            problems.append(f"card P{rank} is titled {title!r} but the finding ranked {rank} is {expected_title!r}")
        section = next((name for name, start, end in sections if start <= position < end), None)
        belongs = CARDS_SECTION[finding_kind(finding)]
        if section != belongs:
            problems.append(f"card P{rank} is under '{section}' but belongs under '{belongs}'")
    for rank, count in sorted(seen.items()):
        if count > 1 and rank in by_rank:
            problems.append(f"finding P{rank} has {count} cards (expected exactly one)")
    for rank, finding in sorted(by_rank.items()):
        if rank not in seen:
            problems.append(f"ranked finding P{rank} ({one_line(finding.title)!r}) has no card")
    ranks = [r for r, _, _ in cards]
    if ranks != sorted(ranks, key=lambda r: (SECTIONS.index(CARDS_SECTION[finding_kind(by_rank[r])])
                                              if r in by_rank else -1, r)):
        problems.append("the cards are not in rank order within their sections: " + ", ".join(f"P{r}" for r in ranks))
    unknown = sorted({int(m.group(1)) for m in _P_REFERENCE.finditer(_prose(markdown))} - set(by_rank))
    if unknown:
        problems.append("references to P-items that do not exist: " + ", ".join(f"P{r}" for r in unknown))
    ranks = sorted(by_rank)
    if ranks != list(range(1, len(ranks) + 1)):
        problems.append("the priority data's global ranks are not contiguous from 1")
    return problems


def _check_metric_table(markdown: str, sections: list[tuple[str, int, int]]) -> list[str]:
    summary = next(((s, e) for name, s, e in sections if name == "Executive Summary"), None)
    if summary is None:
        return ["no Executive Summary metric table (section missing)"]
    block = markdown[summary[0]:summary[1]]
    if not re.search(r"^\|.*\|\s*$", block, re.MULTILINE):
        return ["the Executive Summary has no metric table"]
    problems = []
    for label in METRIC_ROWS:
        rows = re.findall(rf"^\|\s*{re.escape(label)}\s*\|(.*)\|\s*$", block, re.MULTILINE)
        if not rows:
            problems.append(f"metric table row '{label}' is missing")
        elif len(rows) > 1:
            problems.append(f"metric table row '{label}' appears {len(rows)} times")
        elif not rows[0].strip(" |") or re.search(r"\|\s*(X ms|Y%|Z%|W%)\s*(\||$)", "|" + rows[0]):
            problems.append(f"metric table row '{label}' has no value")
    return problems


def validate_analysis(markdown: str, priority: PriorityData) -> list[str]:
    """Problems in a rendered analysis.md; an empty list means the report is valid."""
    if len(markdown.strip()) < 100:
        return ["the report is empty or shorter than 100 characters"]
    text = _strip_images(markdown)  # section offsets below refer to this text
    sections = _sections(text)
    return (_check_title(text, priority) + _check_sections(sections) + _check_placeholders(text)
            + _check_metric_table(text, sections) + _check_markers(text, sections, priority))
