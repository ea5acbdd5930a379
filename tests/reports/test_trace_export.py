"""From a finding to the trace: every finding's window in `findings` reproduces from its claims, and
`tracelake export` writes a window as a Chrome trace that TraceLake ingests back, with the findings
overlaid on their own track."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tracelake.lakehouse import open_warehouse

BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
FINDINGS_PID = "TraceLake findings"


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("export")
    result = run_cli("analyze", str(BERT), "--warehouse", str(root / "wh"), "--out", str(root / "report"), "--quiet")
    assert result.returncode == 0, result.stderr
    return root / "wh", result.stdout.split()[0]


def _db(warehouse: Path) -> duckdb.DuckDBPyConnection:
    return open_warehouse(warehouse).connect_read_only()


def test_each_finding_records_the_window_of_its_claims(analyzed: tuple[Path, str]) -> None:
    warehouse, trace_id = analyzed
    with _db(warehouse) as db:
        rows = db.execute("""
            with items as (
                select fk.finding_id, k.ts_us as s, k.end_us as e from finding_kernels fk
                join kernels k on k.trace_id = fk.trace_id and k.event_idx = fk.event_idx where fk.trace_id = $t
                union all
                select fg.finding_id, g.start_us, g.end_us from finding_gaps fg
                join gpu_idle_gaps g on g.trace_id = fg.trace_id and g.gap_id = fg.gap_id where fg.trace_id = $t)
            select f.global_rank, f.ts_start_us, f.ts_end_us, min(items.s), max(items.e), f.claimed_ms
            from findings f left join items using (finding_id) where f.trace_id = $t
            group by all order by 1""", {"t": trace_id}).fetchall()
    assert rows
    for rank, start, end, claimed_start, claimed_end, claimed_ms in rows:
        if claimed_ms is None:
            assert start is None and end is None, rank
        else:
            assert (start, end) == pytest.approx((claimed_start, claimed_end)), rank
            assert end > start


def test_a_host_gap_finding_names_the_host_work_inside_its_gaps(analyzed: tuple[Path, str]) -> None:
    warehouse, _ = analyzed
    report = (warehouse.parent / "report" / "analysis.md").read_text()
    assert "**Window**: trace time" in report and "tracelake export" in report
    lines = [line for line in report.splitlines() if line.startswith("**Host work inside its idle gaps**")]
    assert lines and "python frames:" in lines[0] and "host ops:" in lines[0]


def test_an_exported_finding_opens_as_a_trace_and_ingests_back(analyzed: tuple[Path, str], tmp_path: Path) -> None:
    warehouse, trace_id = analyzed
    out = tmp_path / "p1.json.gz"
    result = run_cli("export", trace_id, "--finding", "P1", "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    document = json.loads(gzip.decompress(out.read_bytes()))
    with _db(warehouse) as db:
        start, end, title = db.execute("select ts_start_us, ts_end_us, title from findings where trace_id = ? and "
                                       "global_rank = 1", [trace_id]).fetchone()
        expected = db.execute("select count(*) from events where trace_id = ? and phase not in ('M', 's', 't', 'f') "
                              "and ts_us <= ? and coalesce(end_us, ts_us) >= ?", [trace_id, end, start]).fetchone()[0]
    own = [e for e in document["traceEvents"] if e["pid"] != FINDINGS_PID and e["ph"] != "M"]
    # every event of the window (flows only whole: test_a_finding_export_holds_the_host_side_of_its_window)
    inside = [e for e in own if e["ph"] not in "stf" and e["ts"] <= end and e["ts"] + e.get("dur", 0.0) >= start]
    assert len(inside) == expected > 0
    annotations = [e for e in document["traceEvents"] if e["pid"] == FINDINGS_PID and e["ph"] == "X"]
    p1 = next(e for e in annotations if e["name"].startswith("P1:"))
    assert p1["args"]["title"] == title and p1["args"]["impact_percent_of_e2e"] > 0
    assert any(e["name"] == "exported: P1" for e in annotations)
    again = run_cli("ingest", str(out), "--warehouse", str(tmp_path / "wh2"))
    assert again.returncode == 0, again.stderr
    with _db(tmp_path / "wh2") as db:
        kernels = db.execute("select count(*) from kernels").fetchone()[0]
        marks = db.execute(f"select count(*) from events where pid = '{FINDINGS_PID}' and phase = 'X'").fetchone()[0]
    assert kernels > 0 and marks == len(annotations)


def test_a_finding_export_holds_the_host_side_of_its_window(analyzed: tuple[Path, str], tmp_path: Path) -> None:
    """Issue 28: a finding's export had no cpu_op and flow arrows that ended without a start."""
    warehouse, trace_id = analyzed
    out = tmp_path / "p1.json"
    result = run_cli("export", trace_id, "--finding", "P1", "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    own = [e for e in json.loads(out.read_text())["traceEvents"] if e["pid"] != FINDINGS_PID and e["ph"] != "M"]
    categories = {e.get("cat") for e in own}
    assert {"cpu_op", "cuda_runtime", "kernel"} <= categories
    starts, ends = {e["id"] for e in own if e["ph"] == "s"}, {e["id"] for e in own if e["ph"] == "f"}
    assert starts == ends and starts
    again = run_cli("ingest", str(out), "--warehouse", str(tmp_path / "wh2"), "--quiet")
    assert again.returncode == 0, again.stderr
    with _db(tmp_path / "wh2") as db:
        launched_share = db.execute("select sum(dur_us) filter (where is_linked) / sum(dur_us) from kernels").fetchone()[0]
    assert launched_share >= 0.95


def test_export_windows_by_step_and_by_time(analyzed: tuple[Path, str], tmp_path: Path) -> None:
    warehouse, trace_id = analyzed
    with _db(warehouse) as db:
        step = db.execute("select min(step_number) from profiler_steps where trace_id = ?", [trace_id]).fetchone()[0]
        start, end = db.execute("select min(ts_us), min(ts_us) + 1000 from kernels where trace_id = ?", [trace_id]).fetchone()
    if step is not None:
        by_step = run_cli("export", trace_id, "--step", str(step), "--out", str(tmp_path / "s.json"), "--warehouse", str(warehouse))
        assert by_step.returncode == 0, by_step.stderr
        assert f"ProfilerStep#{step}" in by_step.stdout
    by_time = run_cli("export", trace_id, "--window", f"{start}:{end}", "--out", str(tmp_path / "w.json"),
                      "--warehouse", str(warehouse))
    assert by_time.returncode == 0, by_time.stderr
    events = json.loads((tmp_path / "w.json").read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" for e in events)


@pytest.mark.parametrize(("args", "message"), [
    (["--finding", "P99"], "no finding P99"),
    (["--finding", "best"], "is not P<n>"),
    (["--window", "5:3"], "END must be after START"),
    (["--window", "soon"], "is not START:END"),
    (["--finding", "P1", "--step", "1"], "give one of"),
    (["--step", "99999"], "no ProfilerStep#99999"),
])
def test_export_refuses_bad_windows_with_one_line(analyzed: tuple[Path, str], tmp_path: Path, args: list[str],
                                                  message: str) -> None:
    warehouse, trace_id = analyzed
    out = tmp_path / "x.json"
    result = run_cli("export", trace_id, *args, "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 2
    assert message in result.stderr and result.stderr.strip().count("\n") == 0
    assert not out.exists()


def test_export_does_not_replace_a_file_without_force(analyzed: tuple[Path, str], tmp_path: Path) -> None:
    warehouse, trace_id = analyzed
    out = tmp_path / "mine.json"
    out.write_text("my notes")
    refused = run_cli("export", trace_id, "--out", str(out), "--warehouse", str(warehouse))
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert out.read_text() == "my notes"
    replaced = run_cli("export", trace_id, "--out", str(out), "--force", "--warehouse", str(warehouse))
    assert replaced.returncode == 0, replaced.stderr
    assert json.loads(out.read_text())["tracelake_export"]["window"] == "whole trace"
