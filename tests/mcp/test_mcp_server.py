"""`tracelake mcp`: a scripted agent session over a real warehouse (the BERT-small forward pass on
H100, analyzed, and on MI300X, ingested), through the mcp package's in-process client; and the real
command spawned over stdio."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import EXPECTED, TRACES, run_cli
from tracelake.lakehouse import open_warehouse
from tracelake.mcp_answers import MAX_CELL_CHARS
from tracelake.mcp_server import build_server

H100_BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
MI300_BERT = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
TOOLS = {"list_traces", "list_jobs", "list_tables", "describe_table", "query", "list_findings", "read_report",
         "compare", "export_window"}
# TraceLens' busy % of each trace (tests/data/expected/<trace>/gpu_timeline.csv)
EXPECTED_BUSY = {
    name: float(next(r for r in csv.DictReader((EXPECTED / folder / "gpu_timeline.csv").open()) if r["type"] == "busy_time")["percent"])
    for name, folder in ((H100_BERT.name, "h100__gaunernst_bert-small-uncased__1016001"),
                         ("mi300", "mi300__gaunernst_bert-small-uncased__1016001"))}
# an answer an agent reads in one go: a page of rows or a chunk of a report, never a dump
MAX_ANSWER_CHARS = 40_000


@dataclass(frozen=True)
class AnalyzedWarehouse:
    root: Path
    h100: str  # trace ids
    mi300: str


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> AnalyzedWarehouse:
    folder = tmp_path_factory.mktemp("mcp")
    root = folder / "wh"
    done = run_cli("analyze", str(H100_BERT), "--warehouse", str(root), "--out", str(folder / "report"), "--quiet")
    assert done.returncode == 0, done.stderr
    done = run_cli("ingest", str(MI300_BERT), "--warehouse", str(root), "--quiet")
    assert done.returncode == 0, done.stderr
    wh = open_warehouse(root)
    with wh.connect_read_only() as con:
        ids = dict(con.execute("select source_path, trace_id from traces").fetchall())
    return AnalyzedWarehouse(root, ids[str(H100_BERT.resolve())], ids[str(MI300_BERT.resolve())])


Call = Callable[..., Awaitable[dict[str, Any]]]
Fail = Callable[..., Awaitable[str]]


def in_session(root: Path, script: Callable[[Call, Fail], Awaitable[None]]) -> None:
    """Run `script(call, fail)` against the server over `root`: `call(tool, **args)` returns the
    answer (and fails the test on a tool error); `fail(tool, **args)` returns the error's message."""
    async def main() -> None:
        async with Client(build_server(open_warehouse(root))) as client:
            async def call(tool: str, **arguments: Any) -> dict[str, Any]:
                result = await client.call_tool(tool, arguments)
                text = result.content[0].text  # type: ignore[union-attr]
                assert not result.is_error, text
                assert len(text) < MAX_ANSWER_CHARS, f"{tool} answered {len(text)} characters"
                return result.structured_content or {}

            async def fail(tool: str, **arguments: Any) -> str:
                result = await client.call_tool(tool, arguments)
                text = result.content[0].text  # type: ignore[union-attr]
                assert result.is_error, f"{tool}({arguments}) was not refused: {text[:300]}"
                assert "Traceback" not in text and "\n" not in text.strip(), text
                return text
            await script(call, fail)
    anyio.run(main)


def test_agent_session_lists_describes_and_asks_across_traces(analyzed: AnalyzedWarehouse) -> None:
    """An agent's first calls: the traces, the table list, one table's documented columns, then one
    question over every trace whose answer is TraceLens' busy % of each."""
    documented = yaml.safe_load((Path(__file__).parents[2] / "models" / "marts" / "gpu_timeline.yml").read_text())
    busy_doc = next(c for c in documented["models"][0]["columns"] if c["name"] == "busy_time_percent")["description"]

    async def script(call: Call, fail: Fail) -> None:
        traces = await call("list_traces")
        assert traces["total"] == 2 and {r["trace_id"] for r in traces["rows"]} == {analyzed.h100, analyzed.mi300}
        again = await call("query", sql=traces["sql"])
        assert again["rows"] == traces["rows"]  # the answer's SQL gives the answer

        tables = await call("list_tables", page_size=500)
        by_name = {r["table"]: r for r in tables["rows"]}
        assert tables["total"] == len(by_name) > 50
        assert by_name["gpu_timeline"]["description"] and "\n" not in by_name["gpu_timeline"]["description"]
        assert by_name["findings"]["documented_columns"] > 10  # the analysis tables' docs (dbt sources) too

        schema = await call("describe_table", table="gpu_timeline")
        columns = {r["column"]: r for r in schema["rows"]}
        assert " ".join(busy_doc.split()) == columns["busy_time_percent"]["description"]
        assert columns["busy_time_percent"]["type"] == "DOUBLE" and schema["total"] == len(columns)
        second = await call("describe_table", table="gpu_timeline", page=2, page_size=5)
        assert [r["column"] for r in second["rows"]] == [r["column"] for r in schema["rows"][5:10]]

        busy = await call("query", sql="select t.file_name, t.device_name, g.busy_time_percent from gpu_timeline g "
                                       "join traces t using (trace_id) order by t.device_name")
        assert busy["total"] == 2
        measured = {("mi300" if "MI300" in r["device_name"] else r["file_name"]): r["busy_time_percent"]
                    for r in busy["rows"]}
        assert measured == pytest.approx(EXPECTED_BUSY, rel=1e-6)
        assert "limit 50 offset 0" in busy["page_sql"]

        events = await call("query", sql="select event_idx, name, args from events order by trace_id, event_idx",
                            page=3, page_size=20)
        assert events["page"] == 3 and len(events["rows"]) == 20 and events["total"] > 1000
        assert all(len(r["args"] or "") <= MAX_CELL_CHARS + 80 for r in events["rows"])
    in_session(analyzed.root, script)


def test_a_finding_carries_the_sql_that_gives_its_numbers(analyzed: AnalyzedWarehouse) -> None:
    async def script(call: Call, fail: Fail) -> None:
        findings = await call("list_findings", trace=analyzed.h100)
        assert findings["total"] >= 3 and [r["global_rank"] for r in findings["rows"]][:3] == [1, 2, 3]
        first = await call("list_findings", trace=analyzed.h100[:8], finding="P1")
        (p1,) = first["rows"]
        assert p1 == findings["rows"][0] and p1["claimed_ms"] > 0
        evidence = await call("query", sql=p1["evidence_sql"])
        (row,) = evidence["rows"]
        assert row["claimed_ms"] == pytest.approx(p1["claimed_ms"], abs=5e-4)
        assert row["recoverable_ms"] == pytest.approx(p1["recoverable_ms"], abs=5e-4)
        mine = await call("query", sql=first["sql"])  # the answer's own SQL
        assert mine["rows"] == [p1]

        report = await call("read_report", trace=analyzed.h100, max_chars=2000)
        assert report["text"].startswith("#") and len(report["text"]) == 2000 and report["next_offset"] == 2000
        titles = [s["title"] for s in report["sections"]]
        assert len(titles) > 3
        whole = Path(report["analysis_md"]).read_text()
        assert sum(s["chars"] for s in report["sections"]) <= len(whole)
        section, text, offset = titles[1], "", 0
        while offset is not None:
            chunk = await call("read_report", trace=analyzed.h100, section=section, offset=offset, max_chars=500)
            text, offset = text + chunk["text"], chunk["next_offset"]
        assert text.split("\n", 1)[0].lstrip("# ") == section
        assert (await call("read_report", trace=analyzed.h100, section=2, max_chars=500))["text"] == text[:500]
        whole_lines = set(whole.splitlines())
        assert all(line in whole_lines for line in text.splitlines() if "inline image" not in line)
        # the report links its chart (perf_improvement.png), so no base64 line reaches the agent
        assert "base64" not in whole and max(map(len, text.splitlines())) < 2_000
        assert p1["title"] in (await call("read_report", trace=analyzed.h100, max_chars=20000))["text"]
    in_session(analyzed.root, script)


def test_compare_and_export_reuse_the_commands(analyzed: AnalyzedWarehouse, tmp_path: Path) -> None:
    cli = run_cli("compare", analyzed.h100, analyzed.mi300, "--format", "json", "--warehouse", str(analyzed.root))
    assert cli.returncode in (0, 1), cli.stderr
    verdict = json.loads(cli.stdout)
    cli_export = run_cli("export", analyzed.h100, "--finding", "P1", "--out", str(tmp_path / "cli.json"),
                         "--warehouse", str(analyzed.root))
    assert cli_export.returncode == 0, cli_export.stderr

    async def script(call: Call, fail: Fail) -> None:
        compared = await call("compare", baseline=analyzed.h100, candidate=analyzed.mi300, top=3)
        assert (compared["summary"], compared["regression"]) == (verdict["summary"], verdict["regression"])
        assert len(compared["pairs"]) == len(verdict["pairs"]) == 1  # BERT on both sides: one workload
        pair, cli_pair = compared["pairs"][0], verdict["pairs"][0]["verdict"]
        assert pair["baseline"]["devices"] != pair["candidate"]["devices"] and pair["device_warning"]
        assert len(pair["ops"]) == min(3, pair["ops_total"]) and pair["ops_total"] == len(cli_pair["ops"])

        exported = await call("export_window", trace=analyzed.h100, finding="P1", out=str(tmp_path / "p1.json"))
        assert exported["summary"] == cli_export.stdout.strip().replace("cli.json", "p1.json")
        written = json.loads(Path(exported["out"]).read_text())
        assert exported["events"] == sum(1 for e in written["traceEvents"]
                                         if e.get("pid") != "TraceLake findings" and e["ph"] != "M") > 0
        assert "traceEvents" not in json.dumps(exported)
        default = await call("export_window", trace=analyzed.mi300, window="0:1000000000000000000")
        assert Path(default["out"]).is_file() and default["bytes"] > 1000
        assert "exists" in await fail("export_window", trace=analyzed.h100, out=str(tmp_path / "p1.json"))
        marked = await call("export_window", trace=analyzed.h100, finding="P1", out=str(tmp_path / "marked.json"),
                            critical_path=True, counters=True)
        cli_marked = run_cli("export", analyzed.h100, "--finding", "P1", "--critical-path", "--counters",
                             "--out", str(tmp_path / "cli_marked.json"), "--warehouse", str(analyzed.root))
        assert marked["summary"] == cli_marked.stdout.strip().replace("cli_marked.json", "marked.json")
        assert "on the critical path" in marked["summary"] and "counter track" in marked["summary"]
    in_session(analyzed.root, script)


def test_writes_and_bad_requests_are_refused_in_one_line(analyzed: AnalyzedWarehouse, tmp_path: Path) -> None:
    leaked = tmp_path / "traces.csv"

    async def script(call: Call, fail: Fail) -> None:
        assert "DELETE / TRUNCATE is refused" in await fail("query", sql="delete from traces")
        assert "COPY ... TO / FROM is refused" in await fail("query", sql=f"copy traces to '{leaked}'")
        assert "ATTACH is refused" in await fail("query", sql=f"attach '{tmp_path / 'other.duckdb'}' as other")
        assert "refused" in await fail("query", sql="select 1; drop table findings")
        assert "Parser Error" in await fail("query", sql="selec trace_id from traces")
        assert "does not exist" in await fail("query", sql="select * from no_such_table")
        assert "past the last page" in await fail("list_traces", page=9)
        assert "page_size 0" in await fail("list_traces", page_size=0)
        assert "no public table 'gpu_timelin'" in await fail("describe_table", table="gpu_timelin")
        assert "fedcba9876" in await fail("list_findings", trace="fedcba9876")
        assert "P99" in await fail("list_findings", trace=analyzed.h100, finding="P99")
        assert "no report" in await fail("read_report", trace=analyzed.mi300)
        assert "no section" in await fail("read_report", trace=analyzed.h100, section="no such heading")
        assert "is not P<n>" in await fail("export_window", trace=analyzed.h100, finding="best")
        still = await call("list_traces")
        assert still["total"] == 2
    in_session(analyzed.root, script)
    assert not leaked.exists()


def test_the_command_serves_over_stdio_and_refuses_a_missing_warehouse(analyzed: AnalyzedWarehouse, tmp_path: Path) -> None:
    async def main() -> set[str]:
        command = StdioServerParameters(command=sys.executable, args=["-m", "tracelake", "mcp", "--warehouse",
                                                                      str(analyzed.root)],
                                        env={"DO_NOT_TRACK": "1"})
        async with Client(command) as client:
            tools = await client.list_tools()
            answer = await client.call_tool("list_traces", {"page_size": 1})
            assert answer.structured_content and answer.structured_content["total"] == 2
            return {tool.name for tool in tools.tools}
    assert anyio.run(main) == TOOLS

    missing = run_cli("mcp", "--warehouse", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.count("\n") == 1 and "no warehouse at" in missing.stderr, missing.stderr
