"""kill -9 of `tag`, `analyze` and `dashboard` leaves nothing half done and nothing behind (issue 27,
item 7): a tag change is all or nothing and never leaves a temporary file in a partition, a report
lands with its `analyses` row or not at all, and the staging folders a killed run made beside its
output folder are removed by any later command of the warehouse.

Kills come at the named points (tracelake/crashpoints.py) and at seeded random moments."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from tests.conftest import DATA, TRACES, run_cli
from tracelake.crashpoints import CRASH_AT_ENV
from tracelake.graph_captures import read_capture_folder
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

pytestmark = pytest.mark.usefixtures("classic_layout")  # the classic layout's own machinery

FIRST = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
SECOND = TRACES / "torch_compile_triton" / "trace.json.gz"
SGLANG = TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURES = DATA / "captures" / "inference__sglang_decode"
KILLED = -signal.SIGKILL
RANDOM_KILLS = 10  # the probe saw 2 of 10 random kills of `tag` half applied
SEED = 20261202
TAG_POINTS = ["tag-staged", "tag-decided", "tag-renamed-first"]


def _cli(*args: str, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={CRASH_AT_ENV: crash_at} if crash_at else None)


def _popen(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tracelake", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "DO_NOT_TRACK": "1"})


def _kill_after(args: list[str], delay: float) -> int:
    process = _popen(*args)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
    return process.wait()


def _tags(folder: Path) -> dict[str, str | None]:
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        return dict(db.execute("select trace_id, run from runs order by trace_id").fetchall())


def _temporary_files(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in (folder / "parquet").rglob("*") if not p.name.endswith(".parquet")
            and p.is_file()]


def _pending(folder: Path) -> list[str]:
    pending = folder / "pending"
    return [p.name for p in pending.iterdir()] if pending.is_dir() else []


@pytest.fixture(scope="module")
def two_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two_traces") / "wh"
    result = run_cli("ingest", str(FIRST), str(SECOND), "--warehouse", str(folder), "--tag", "run=old", "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


def _copy(source: Path, tmp_path: Path, name: str = "wh") -> Path:
    folder = tmp_path / name
    shutil.copytree(source, folder)
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0  # re-points the copy's views
    return folder


def _assert_whole(folder: Path, before: dict[str, str | None]) -> None:
    """After the next command: both traces carry the old run tag or both the new one, no temporary file
    is left in a partition and nothing is pending."""
    after = _tags(folder)
    assert set(after.values()) in ({"old"}, {"new"}), after
    assert after.keys() == before.keys()
    assert _temporary_files(folder) == []
    assert _pending(folder) == []


@pytest.mark.parametrize("point", TAG_POINTS)
def test_a_tag_killed_at_a_named_point_is_all_or_nothing(two_traces: Path, tmp_path: Path, point: str) -> None:
    folder = _copy(two_traces, tmp_path)
    before = _tags(folder)
    killed = _cli("tag", "run=old", "run=new", "--warehouse", str(folder), crash_at=point)
    assert killed.returncode == KILLED, killed.stderr
    assert _temporary_files(folder) == []  # staged in the pending area, never beside a partition
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
    _assert_whole(folder, before)
    # decided (the journal written) means done: the next command rolls it forward
    assert set(_tags(folder).values()) == ({"old"} if point == "tag-staged" else {"new"})


def test_a_tag_killed_at_random_moments_is_all_or_nothing(two_traces: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    outcomes = []
    for trial in range(RANDOM_KILLS):
        folder = _copy(two_traces, tmp_path, f"wh{trial}")
        before = _tags(folder)
        code = _kill_after(["tag", "run=old", "run=new", "--warehouse", str(folder)], rng.uniform(0.3, 2.0))
        outcomes.append(code)
        assert _temporary_files(folder) == []
        assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
        _assert_whole(folder, before)
        shutil.rmtree(folder)
    assert KILLED in outcomes, outcomes  # at least one kill landed mid-run


@pytest.fixture(scope="module")
def capture_linked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    wh = Warehouse(tmp_path_factory.mktemp("capture_linked") / "wh")
    report = ingest_paths([SGLANG], wh, {}, jobs=2, captures={SGLANG: read_capture_folder(SGLANG_CAPTURES)})
    assert not report.failed, report.failed
    return wh.root, next(o.trace_id for o in report.outcomes if o.path == SGLANG) or ""


def _mapped(folder: Path, replay: str) -> int:
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        return db.execute("select count(*) from kernels where trace_id = ? and link_method = 'graph_capture'",
                          [replay]).fetchone()[0]


@pytest.mark.parametrize("point", ["tag-renamed-first", "models-updating", "before-publish", "after-publish"])
def test_a_killed_capture_retag_is_re_modelled_by_the_next_command(capture_linked: tuple[Path, str], tmp_path: Path,
                                                                   point: str) -> None:
    source, replay = capture_linked
    folder = _copy(source, tmp_path)
    assert _mapped(folder, replay) == 544
    killed = _cli("tag", replay, "--remove", "graph_capture_traces", "--warehouse", str(folder), crash_at=point)
    assert killed.returncode == KILLED, killed.stderr
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
    assert _mapped(folder, replay) == 0  # the tag no longer names the capture: neither do the marts
    assert _pending(folder) == [] and _temporary_files(folder) == []


# ---- analyze and dashboard ------------------------------------------------------------------------

def _recorded(folder: Path, out: Path) -> tuple[int, int]:
    """(analyses rows pointing at `out`, findings of that analysis)."""
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        rows = db.execute("select trace_id, finding_count from analyses where out_dir = ?", [str(out)]).fetchall()
        findings = db.execute("select count(*) from findings where trace_id = ?", [rows[0][0]]).fetchone()[0] if rows else 0
    return len(rows), findings


def _staging_beside(out: Path) -> list[str]:
    return [p.name for p in out.parent.glob(".tracelake-staging-*")]


@pytest.fixture(scope="module")
def analyzed(two_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The warehouse after FIRST was analyzed once (its ingest and models done)."""
    folder = tmp_path_factory.mktemp("analyzed") / "wh"
    shutil.copytree(two_traces, folder)
    result = run_cli("analyze", str(FIRST), "--warehouse", str(folder), "--out", str(folder.parent / "first"), "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.parametrize("repeat", range(2))
@pytest.mark.parametrize("point", ["report-staged", "report-published"])
def test_a_killed_analyze_report_lands_with_its_rows_or_not_at_all(analyzed: Path, tmp_path: Path, point: str,
                                                                   repeat: int) -> None:
    folder = _copy(analyzed, tmp_path)
    out = tmp_path / "reports" / "report"
    out.parent.mkdir()
    user_folder = out.parent / ".tracelake-staging-report-mine"  # named like ours, but the user's
    user_folder.mkdir()
    killed = _cli("analyze", str(FIRST), "--warehouse", str(folder), "--out", str(out), "--quiet", crash_at=point)
    assert killed.returncode == KILLED, killed.stderr
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0  # any later command
    landed = (out / "analysis.md").is_file()
    assert landed == (point == "report-published")
    rows, findings = _recorded(folder, out)
    assert rows == (1 if landed else 0) and (findings > 0) == landed
    assert _staging_beside(out) == [user_folder.name] and _pending(folder) == []
    if landed:  # export finds the report's findings
        exported = run_cli("export", _trace_id(folder), "--finding", "P1", "--warehouse", str(folder),
                           "--out", str(tmp_path / "p1.json"))
        assert exported.returncode == 0, exported.stderr


def _trace_id(folder: Path) -> str:
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        return db.execute("select trace_id from traces where file_name = ?", [FIRST.name]).fetchone()[0]


def test_analyze_and_dashboard_killed_at_random_moments_leave_nothing_beside_their_output(
        analyzed: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    folder = _copy(analyzed, tmp_path)
    outcomes = []
    for trial in range(RANDOM_KILLS):
        out = tmp_path / f"out{trial}" / ("report" if trial % 2 else "board")
        out.parent.mkdir()
        command = (["analyze", str(SECOND), "--out", str(out), "--quiet"] if trial % 2
                   else ["dashboard", "--out", str(out)])
        started = time.monotonic()
        outcomes.append(_kill_after([*command, "--warehouse", str(folder)], rng.uniform(0.5, 6.0 if trial % 2 else 3.0)))
        assert time.monotonic() - started < 120
        assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
        assert _staging_beside(out) == [], (trial, command)
        assert _pending(folder) == []
        if trial % 2:
            rows, _ = _recorded(folder, out)
            assert rows == (1 if (out / "analysis.md").is_file() else 0)
    assert KILLED in outcomes, outcomes
