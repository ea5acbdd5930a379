"""The README renders as written on a CommonMark renderer: every code fence opens and closes on a
line of its own, so code stays code and prose stays prose; and it documents every command."""

from __future__ import annotations

import re
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


def _first_screen() -> str:
    text = README.read_text()
    return text[:text.index("## Commands")]


def _demo_recipe() -> str:
    makefile = (README.parent / "Makefile").read_text()
    return makefile[makefile.index("\ndemo:"):].split("\n\n", 1)[0]


def test_the_first_screen_names_only_what_exists() -> None:
    """The two commands to start with; every tracelake command and mart it names is a real one."""
    screen = _first_screen()
    assert "make demo" in screen and "make test" in screen
    named_commands = set(re.findall(r"`tracelake (\w+)", screen))
    assert named_commands and named_commands <= set(COMMANDS), named_commands - set(COMMANDS)
    marts = README.parent / "models" / "marts"
    named_marts = {"runs", "gpu_timeline", "kernels", "op_perf"}
    assert all(f"`{mart}`" in screen for mart in named_marts)
    assert all((marts / f"{mart}.sql").is_file() for mart in named_marts)


def test_the_demo_does_what_the_first_screen_says() -> None:
    """Against the sample's own GPU (no --platform), GEMM rows with their shapes, and it ends by
    printing the HTML report's and the dashboard's paths the README names."""
    screen, recipe = _first_screen(), _demo_recipe()
    assert "--platform" not in recipe
    gemm_query = next(line for line in recipe.splitlines() if "from gemm_ops" in line)
    assert all(f"'$$.{dim}'" in gemm_query for dim in "MNK")
    last_lines = [line.strip() for line in recipe.splitlines()[-2:]]
    for path in ("demo_output/report/analysis.html", "demo_output/dashboard/index.html"):
        assert f"`{path}`" in screen
        assert any(line.startswith("@echo") and line.rstrip('"').endswith(path) for line in last_lines), path
