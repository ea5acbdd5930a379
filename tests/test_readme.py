"""The README renders as written on a CommonMark renderer: every code fence opens and closes on a
line of its own, so code stays code and prose stays prose; and it documents every command."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

README = Path(__file__).resolve().parents[1] / "README.md"
COMMANDS = ("ingest", "analyze", "platforms", "build", "sql", "traces", "dashboard", "compare", "rm", "tag", "export",
            "files", "vacuum", "migrate", "mcp", "help")


def _fence_line(line: str) -> bool:
    return line.lstrip().startswith("```")


def test_every_code_fence_of_the_readme_closes() -> None:
    text = README.read_text()
    lines = text.splitlines()
    fences = [token for token in MarkdownIt("commonmark").parse(text) if token.type == "fence"]
    assert fences
    for fence in fences:
        start, end = fence.map
        assert _fence_line(lines[start]), f"fence at line {start + 1} does not open on a fence line"
        assert end <= len(lines) and _fence_line(lines[end - 1]), (
            f"fence opened at line {start + 1} never closes: the rest of the page renders as code")
    # every ``` line is the opening or the closing of one of those fences (none mid-line or stray)
    marker_lines = [number for number, line in enumerate(lines) if _fence_line(line)]
    assert len(marker_lines) == 2 * len(fences)
    mid_line = [number + 1 for number, line in enumerate(lines) if "```" in line and not _fence_line(line)]
    assert not mid_line, f"a fence marker inside a line of text (line {mid_line[0]})"


def test_the_readme_documents_every_command() -> None:
    text = README.read_text()
    for command in COMMANDS:
        assert f"tracelake {command}" in text, command
