"""Names are data, never markup: a real trace whose op, kernel, nn.Module, device and file names are
HTML, markdown and template syntax goes through `tracelake analyze` (standalone and against the
original trace) and `tracelake compare`; every report shows the names literally and stays valid."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.reports.markdown_checks import RENDERER, markup_problems, tables, visible_text
from tests.reports.trace_variants import HOSTILE_KERNELS, HOSTILE_MODULE, HOSTILE_OPS, write_hostile_names
from tracelake.analyzers.contracts import PriorityData
from tracelake.core.markdown_text import one_line
from tracelake.lakehouse import open_warehouse
from tracelake.reports.analysis_md import shown_name, validate_analysis
from tracelake.reports.plot_process import PNG_SIGNATURE

ORIGINAL = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
FILE_NAME = "hostile_<img src=f onerror=alert(4)>|`y`*z* {{ f }}.json.gz"


@dataclass
class Runs:
    warehouse: Path
    standalone: Path  # analyze out folders
    comparative: Path
    regression_md: str  # `tracelake compare --format md` stdout


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    folder = tmp_path_factory.mktemp("hostile")
    trace = folder / "traces" / FILE_NAME
    changed = write_hostile_names(ORIGINAL, trace)
    assert all(changed.values()), changed
    warehouse, standalone, comparative = folder / "wh", folder / "standalone", folder / "comparative"
    for args, out in (((), standalone), (("--compare", str(ORIGINAL)), comparative)):
        result = run_cli("analyze", str(trace), *args, "--warehouse", str(warehouse), "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stderr
        assert "report check failed" not in result.stderr, result.stderr
    compare = run_cli("compare", str(ORIGINAL), str(trace), "--warehouse", str(warehouse), "--format", "md")
    # the renamed ops share too few op signatures for a verdict: not comparable (4), the comparison still printed
    assert compare.returncode == 4 and "## " in compare.stdout, compare.stderr
    return Runs(warehouse, standalone, comparative, compare.stdout)


def _documents(runs: Runs) -> dict[str, str]:
    """Every markdown document the runs wrote, by a short name."""
    documents = {"compare.md": runs.regression_md}
    for label, out in (("standalone", runs.standalone), ("comparative", runs.comparative)):
        for path in [out / "analysis.md", *sorted(out.glob("*_findings/*.md"))]:
            documents[f"{label}/{path.relative_to(out)}"] = path.read_text()
    return documents


def test_reports_are_valid(runs: Runs) -> None:
    for out in (runs.standalone, runs.comparative):
        priority = PriorityData.model_validate_json((out / "priority_data.json").read_text())
        assert validate_analysis((out / "analysis.md").read_text(), priority) == []
        png = (out / "perf_improvement.png").read_bytes()
        assert png.startswith(PNG_SIGNATURE) and len(png) > 5000


def test_no_name_acts_as_markup(runs: Runs) -> None:
    problems = {name: found for name, text in _documents(runs).items() if (found := markup_problems(text))}
    assert problems == {}


def test_names_read_literally(runs: Runs) -> None:
    documents = _documents(runs)
    seen = " ".join(visible_text(text) for text in documents.values())
    # the kernels are named only where they name an op (a synthetic op: kernels without a launching op)
    for name in [*HOSTILE_OPS.values(), next(iter(HOSTILE_KERNELS.values())), HOSTILE_MODULE[1], FILE_NAME]:
        assert one_line(name) in seen, name[:80]

    # the Top Operations table shows op_perf's ten largest ops, each under its own name
    with open_warehouse(runs.warehouse).connect_read_only() as db:
        names = [row[0] for row in db.execute(
            "select name from op_perf where trace_id = (select trace_id from traces where file_name = ?) "
            "and platform = 'H100' order by kernel_time_sum_us desc limit 10", [FILE_NAME]).fetchall()]
    analysis = documents["standalone/analysis.md"]
    header, *rows = next(t for t in tables(analysis) if t[0][:2] == ["#", "Operation"])
    assert len(header) == 8 and len(rows) == 10
    for rank, (name, row) in enumerate(zip(names, rows, strict=True), start=1):
        shown = one_line(name)
        assert row[:2] == [str(rank), shown_name(shown)]  # kernel names short, their full names in the appendix
    assert sum(n in HOSTILE_OPS.values() for n in names) >= 6


def test_the_sql_in_the_reports_runs(runs: Runs) -> None:
    """Every query the reports print is valid SQL: names in it are quoted, fences hold it whole."""
    queries = [token.content for name, text in _documents(runs).items() if name != "compare.md"
               for token in RENDERER.parse(text) if token.type == "fence" and token.info == "sql"]
    assert len(queries) > 20
    with open_warehouse(runs.warehouse).connect_read_only() as db:
        for query in queries:
            db.execute(query).fetchall()


def test_the_comparative_report_names_the_unmatched_ops(runs: Runs) -> None:
    analysis = (runs.comparative / "analysis.md").read_text()
    note = next(line for line in analysis.splitlines() if line.startswith("Ops are matched by"))
    shown = visible_text(note)
    assert "Only in trace 1:" in shown and "Only in trace 2:" in shown
    assert any(one_line(name) in shown for name in HOSTILE_OPS.values())
    assert re.search(r"Only in trace 2: aten::\w+", shown)
