"""Every query of a report's "How to Reproduce Each Number" section runs on the warehouse and returns
the numbers the report prints, on the report's own E2E base (issue 26: the "numbers the agent read"
SQL of the window-edge traces divided by the whole profile span, so its percentages were 45x
(SGLang decode) and 2x smaller than the printed ones).

For each finding P<n> the section holds its claims-ledger query and, under "the numbers the agent
read", the analyzer's own query. The ledger query must return the card's claimed time, GPU event and
idle-gap counts and the mid recoverable time and its share of E2E; the agent's query (or, for a time
the claims leave the finding, the ledger's) must return every "% of E2E" figure of the card's
Insight line (as a cell, or as a column's sum over the finding's member rows), within the rounding
it is printed with. Every other query of the section (the trace facts, the model
identification) must run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pytest

from tests.expert.conftest import ALL_TRACES, SGLANG, ExpertReport

SQL_SECTION = re.compile(r"^### How to Reproduce Each Number\n(.*?)(?=^## |\Z)", re.M | re.S)
SQL_ANCHOR = re.compile(r'^<a id="sql-p(\d+)"></a>$', re.M)
FENCE = re.compile(r"^```sql\n(.*?)^```", re.M | re.S)
AGENT_READ = re.compile(r"^\*P\d+: the numbers the agent read:\*\n\n```sql\n(.*?)^```", re.M | re.S)
CARD = re.compile(r"^### P(\d+): .*?(?=^### |^<a id=|^## |\Z)", re.M | re.S)
INSIGHT = re.compile(r"^\*\*Insight\*\*: (.*)$", re.M)
PERCENT_OF_E2E = re.compile(r"(\d[\d,]*(?:\.(\d+))?) ?% of E2E")
CLAIMS = re.compile(r"^\*\*Claims\*\*: ([\d,]+\.\d+) ms of GPU time \((?:(\d+) GPU event\(s\))?(?:, )?"
                    r"(?:(\d+) GPU idle gap\(s\))?\)", re.M)
MID_MS = re.compile(r"^\*\*Impact\*\*: .*?mid [\d.]+% ≈ ([\d,]+\.\d+) ms", re.M)
MID_PERCENT = re.compile(r"^\*\*Impact\*\*: .*?mid (\d+(?:\.(\d+))?)% ≈", re.M)


@dataclass(frozen=True)
class FindingSql:
    rank: int
    ledger: str
    agent_read: str | None


def _section(report: ExpertReport) -> str:
    match = SQL_SECTION.search(report.markdown)
    assert match, f"{report.relative}: no 'How to Reproduce Each Number' section"
    return match.group(1)


def _finding_sql(section: str) -> list[FindingSql]:
    anchors = list(SQL_ANCHOR.finditer(section))
    found = []
    for index, anchor in enumerate(anchors):
        end = anchors[index + 1].start() if index + 1 < len(anchors) else len(section)
        chunk = section[anchor.end():end]
        ledger = FENCE.search(chunk)
        assert ledger, chunk[:300]
        agent_read = AGENT_READ.search(chunk)
        found.append(FindingSql(int(anchor.group(1)), ledger.group(1), agent_read.group(1) if agent_read else None))
    return found


def _cards(report: ExpertReport) -> dict[int, str]:
    return {int(m.group(1)): m.group(0) for m in CARD.finditer(report.markdown.split("## Detailed Analysis")[0])}


def _rows(report: ExpertReport, sql: str) -> tuple[list[str], list[tuple]]:
    cursor = report.db.execute(sql)
    return [d[0] for d in cursor.description], cursor.fetchall()


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _candidates(columns: list[str], rows: list[tuple]) -> list[float]:
    """Every numeric cell of the result, and every numeric column's sum (a finding over several ops
    prints their total)."""
    values: list[float] = []
    for index in range(len(columns)):
        cells = [row[index] for row in rows if isinstance(row[index], (int, float)) and not isinstance(row[index], bool)]
        values += [float(c) for c in cells if math.isfinite(float(c))]
        if len(cells) > 1:
            values.append(float(sum(cells)))
    return values


def _printed_in(value: float, decimals: int, candidates: list[float]) -> bool:
    tolerance = 0.5 * 10 ** -decimals + 1e-9
    return any(abs(c - value) <= tolerance for c in candidates)


def test_every_query_of_the_section_runs(expert_reports: dict[str, ExpertReport]) -> None:
    for relative in ALL_TRACES:
        report = expert_reports[relative]
        queries = FENCE.findall(_section(report))
        assert queries, relative
        for sql in queries:
            try:
                _rows(report, sql)
            except Exception as error:  # noqa: BLE001 - the query and its trace are the message
                pytest.fail(f"{relative}: {error}\n{sql}")


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_the_ledger_query_returns_the_cards_claims(expert_reports: dict[str, ExpertReport], relative: str) -> None:
    report = expert_reports[relative]
    cards = _cards(report)
    for finding in _finding_sql(_section(report)):
        card = cards[finding.rank]
        claims = CLAIMS.search(card)
        columns, rows = _rows(report, finding.ledger)
        if claims is None or "claimed_ms" not in columns:
            continue
        row = dict(zip(columns, rows[0], strict=True))
        assert row["claimed_ms"] == pytest.approx(_number(claims.group(1)), abs=0.0015), (relative, finding.rank)
        assert row["gpu_events"] == int(claims.group(2) or 0), (relative, finding.rank)
        assert row["idle_gaps"] == int(claims.group(3) or 0), (relative, finding.rank)
        mid = MID_MS.search(card)
        if mid is not None:
            assert row["recoverable_ms"] == pytest.approx(_number(mid.group(1)), abs=0.0015), (relative, finding.rank)
            mid_percent = MID_PERCENT.search(card)
            assert mid_percent, card
            assert _printed_in(_number(mid_percent.group(1)), len(mid_percent.group(2) or ""),
                               [row["recoverable_percent_of_e2e"]]), (relative, finding.rank, row)


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_the_agents_query_returns_the_cards_shares_of_e2e(expert_reports: dict[str, ExpertReport], relative: str) -> None:
    report = expert_reports[relative]
    cards = _cards(report)
    for finding in _finding_sql(_section(report)):
        insight = INSIGHT.search(cards[finding.rank])
        if finding.agent_read is None or insight is None:
            continue
        printed = PERCENT_OF_E2E.findall(insight.group(1))
        if not printed:
            continue
        # the agent's own read, or the claims ledger's share (a time the claims leave it)
        candidates = _candidates(*_rows(report, finding.agent_read)) + _candidates(*_rows(report, finding.ledger))
        for value, decimals in printed:
            assert _printed_in(_number(value), len(decimals), candidates), (
                f"{relative} P{finding.rank}: the card prints {value} % of E2E; the agent's query returns "
                f"{sorted(round(c, 4) for c in candidates)[:40]}")


def test_a_window_edge_trace_reads_its_shares_against_the_analysis_window(
        expert_reports: dict[str, ExpertReport]) -> None:
    """SGLang decode: 10.45 ms of step in a 473 ms profile window; the queries divide by the step."""
    report = expert_reports[SGLANG]
    window_ms, total_ms = report.sql("""select f.analysis_window_ms, t.total_time_ms from workload_facts as f
                                        inner join gpu_timeline as t using (trace_id) where trace_id = $trace_id""")[0]
    assert report.e2e_ms == pytest.approx(window_ms, rel=1e-6)
    assert total_ms > 20 * window_ms
    reads = [_rows(report, f.agent_read) for f in _finding_sql(_section(report)) if f.agent_read]
    compute_reads = [(columns, rows) for columns, rows in reads if {"time_ms", "percent_of_e2e"} <= set(columns)]
    assert len(compute_reads) >= 3  # the GEMM, attention and norm findings
    for columns, rows in compute_reads:
        shares = [row[columns.index("percent_of_e2e")] for row in rows]
        time_ms = [row[columns.index("time_ms")] for row in rows]
        assert shares == pytest.approx([100.0 * t / window_ms for t in time_ms], rel=1e-6)
