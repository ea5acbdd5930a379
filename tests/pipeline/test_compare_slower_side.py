"""The comparative report says which trace is slower and gives the slower side's gap its card,
whichever side that is (issue 28: "Efficiency (100·t2/t1)" read 303.8 % for the 3x slower side,
which then got no card). The pair: BERT on H100 and a copy whose GPU events last 3x as long."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.test_compare_cli import scaled_trace
from tests.conftest import TRACES
from tracelake.analyzers.contracts import PriorityData
from tracelake.lakehouse import open_warehouse
from tracelake.pipeline import AnalyzeOptions, run_analysis

BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
SLOWDOWN = 3.0


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`fast_first`: BERT against its 3x slower copy (trace 2 slower); `slow_first`: the reverse."""
    root = tmp_path_factory.mktemp("slower_side")
    slow = scaled_trace(BERT, root / "bert_3x.json.gz", SLOWDOWN)
    warehouse = open_warehouse(root / "wh")
    outs = {}
    for name, (first, second) in {"fast_first": (BERT, slow), "slow_first": (slow, BERT)}.items():
        outs[name] = root / name
        run_analysis(first, warehouse, AnalyzeOptions(out_dir=outs[name], jobs=1, compare=second))
    return outs


def _top_operations(markdown: str) -> list[list[str]]:
    table = markdown.split("### Top Operations", 1)[1].split("\n\n", 2)[1]
    assert "| Slower side (time ratio) |" in table.splitlines()[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:] if line.startswith("| ")]


@pytest.mark.parametrize(("name", "slower"), [("fast_first", 2), ("slow_first", 1)])
def test_the_slower_side_is_named_and_gets_the_cards(reports: dict[str, Path], name: str, slower: int) -> None:
    markdown = (reports[name] / "analysis.md").read_text()
    assert "Efficiency (100·t2/t1)" not in markdown and "300.0%" not in markdown
    rows = _top_operations(markdown)
    assert rows
    for cells in rows:  # every GPU event lasts 3x as long on the slow side, so every op does
        assert cells[7] == f"T{slower} {SLOWDOWN:.2f}x slower", cells
        assert float(cells[4 if slower == 1 else 5]) > float(cells[5 if slower == 1 else 4]), cells
    priority = PriorityData.model_validate_json((reports[name] / "priority_data.json").read_text())
    compute = [f for f in priority.findings if f.tier == "compute"]
    assert compute, "the slower side's gaps get cards"
    e2e = priority.e2e_time_ms
    for finding in compute:
        assert re.search(rf": trace {slower} takes 3\.0\dx the time of trace {3 - slower}\b", finding.title), finding.title
        members = finding.evidence["members"]
        t1 = [m["time_ms"] for m in members]
        t2 = [m["time_ms"] * m["efficiency_percent"] / 100 for m in members]  # efficiency = 100 t2 / t1
        # the measured gap of the slower side, on the report's E2E (trace 1's)
        expected = sum(abs(b - a) for a, b in zip(t1, t2, strict=True)) / e2e * 100
        if slower == 2:
            assert finding.impact_high == pytest.approx(expected, rel=1e-6)
            assert finding.claimed_time_ms is None  # trace 2's time, none of trace 1's GPU events
        else:  # TraceLens' trace 1 gap, capped at trace 1's roofline gap per member
            assert finding.impact_high <= expected * (1 + 1e-6)
