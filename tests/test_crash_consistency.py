"""kill -9 at any instant leaves a warehouse that the next command repairs: every committed trace is
in every mart, as in a warehouse built without kills, and nothing a dead run staged is left.

Kills come two ways: at named points (tracelake/crashpoints.py: the process SIGKILLs itself there)
and at seeded random moments of a run. Child processes die with their parent.
"""

from __future__ import annotations

import json
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

from tests.conftest import TRACES, run_cli
from tests.reports.trace_variants import write_repeated
from tracelake.crashpoints import CRASH_AT_ENV
from tracelake.ingest.decode import CHUNK_EVENTS

pytestmark = pytest.mark.usefixtures("classic_layout")  # the classic layout's own machinery

FIRST = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
SECOND = TRACES / "torch_compile_triton" / "trace.json.gz"
BIG = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"  # big enough for forked decode workers
KILLED = -signal.SIGKILL
RANDOM_KILLS = 6
SEED = 20261201
# columns that differ between two correct warehouses: when things happened
CLOCK_COLUMNS = {"ingested_at", "models_updated_at", "parquet_committed_at", "ingest_seconds", "source_path"}


def _marts(db: duckdb.DuckDBPyConnection, plan: Path) -> list[str]:
    """Every incremental model (from the compiled plan) and the public views over them."""
    relations = [m["relation"] for m in json.loads(plan.read_text())["models"]]
    return relations + ["traces", "runs", "kernels", "op_perf", "kernel_summary", "cpu_ops"]


def _fingerprint(folder: Path) -> dict[str, object]:
    """Per trace and mart: the row count, and the rows themselves for the timeline."""
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        marts = _marts(db, folder / "dbt" / "plan.json")
        trace_ids = sorted(r[0] for r in db.execute("select trace_id from traces").fetchall())
        counts = {
            (mart, trace_id): db.execute(f"select count(*) from {mart} where trace_id = ?", [trace_id]).fetchone()[0]
            for mart in marts for trace_id in trace_ids
        }
        columns = [c[0] for c in db.execute("describe gpu_timeline").fetchall() if c[0] not in CLOCK_COLUMNS]
        timeline = db.execute(f"select {', '.join(columns)} from gpu_timeline order by trace_id").fetchall()
    rounded = [tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in timeline]
    return {"traces": trace_ids, "counts": counts, "timeline": rounded}


def _leftovers(folder: Path) -> list[str]:
    staged = [p for p in (folder / "staging").glob("*")] if (folder / "staging").is_dir() else []
    snapshots = [p for p in folder.glob(".tracelake-*")]
    committed = {p.name for p in (folder / "parquet" / "trace_files").glob("trace_id=*")}
    orphans = [p for p in (folder / "parquet").glob("*/trace_id=*") if p.name not in committed]
    return [str(p.relative_to(folder)) for p in staged + snapshots + orphans]


def _ingest(folder: Path, *traces: Path, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {CRASH_AT_ENV: crash_at} if crash_at else {}
    return run_cli("ingest", *map(str, traces), "--warehouse", str(folder), "--quiet", env=env)


@pytest.fixture(scope="module")
def with_first(built_once) -> Path:
    return built_once(FIRST)


@pytest.fixture(scope="module")
def reference(with_first: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """FIRST, then SECOND, ingested without kills."""
    folder = tmp_path_factory.mktemp("reference") / "wh"
    shutil.copytree(with_first, folder)
    assert _ingest(folder, SECOND).returncode == 0
    return _fingerprint(folder)


@pytest.fixture(scope="module")
def first_only(with_first: Path) -> dict[str, object]:
    return _fingerprint(with_first)


def _copy(warehouse: Path, tmp_path: Path) -> Path:
    """A copy of `warehouse`, its raw views re-pointed at the copy (the first command on a moved
    warehouse does that, and would pass the crash points itself)."""
    folder = tmp_path / "wh"
    shutil.copytree(warehouse, folder)
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
    return folder


def _assert_repaired(folder: Path, reference: dict[str, object]) -> None:
    assert _fingerprint(folder) == reference
    assert _leftovers(folder) == []


# the points a model update passes, in order (a kill at each; the next command finishes the trace)
UPDATE_POINTS = ["staged", "committed-events", "committed-host_ops", "committed-trace_files", "models-updating",
                 "models-updated", "before-publish", "after-publish"]


COMMITTED_FROM = UPDATE_POINTS.index("committed-trace_files")  # from here on, the trace's Parquet is whole


@pytest.mark.parametrize("point", UPDATE_POINTS)
@pytest.mark.parametrize("next_command", ["traces", "ingest"])
def test_a_killed_model_update_is_finished_by_the_next_command(with_first: Path, first_only: dict[str, object],
                                                                reference: dict[str, object], tmp_path: Path,
                                                                point: str, next_command: str) -> None:
    folder = _copy(with_first, tmp_path)
    killed = _ingest(folder, SECOND, crash_at=point)
    assert killed.returncode == KILLED, killed.stderr
    if next_command == "ingest":  # re-ingest of the killed trace completes it
        again = _ingest(folder, SECOND)
        assert again.returncode == 0, again.stderr
        _assert_repaired(folder, reference)
        return
    # a reader finishes a committed trace, and rolls back one whose Parquet never committed
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    committed = UPDATE_POINTS.index(point) >= COMMITTED_FROM
    _assert_repaired(folder, reference if committed else first_only)
    assert _ingest(folder, SECOND).returncode == 0
    _assert_repaired(folder, reference)


@pytest.mark.parametrize("point", ["plan-build", "before-publish", "after-publish"])
def test_a_killed_first_build_is_finished_by_the_next_command(reference: dict[str, object], tmp_path: Path,
                                                              point: str) -> None:
    folder = tmp_path / "wh"
    assert _ingest(folder, FIRST, crash_at=point).returncode == KILLED
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert _ingest(folder, SECOND).returncode == 0
    _assert_repaired(folder, reference)


def test_kills_at_random_moments_leave_a_repairable_warehouse(with_first: Path, reference: dict[str, object],
                                                              tmp_path: Path) -> None:
    started = time.monotonic()
    timed = _copy(with_first, tmp_path / "timed")
    assert _ingest(timed, SECOND).returncode == 0
    duration = time.monotonic() - started
    chooser = random.Random(SEED)
    outcomes = []
    for trial in range(RANDOM_KILLS):
        folder = _copy(with_first, tmp_path / f"trial{trial}")
        delay = chooser.uniform(0.05, duration)
        process = subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", str(SECOND), "--warehouse",
                                    str(folder), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        process.kill()
        outcomes.append((round(delay, 2), process.wait()))
        again = _ingest(folder, SECOND)
        assert again.returncode == 0, again.stderr
        _assert_repaired(folder, reference)
    assert any(code == KILLED for _, code in outcomes), outcomes  # at least one kill landed mid-run


ANALYZE_POINTS = ["staged", "before-publish", "report-staged", "report-published"]
THIRD = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.parametrize("point", ANALYZE_POINTS)
def test_a_killed_analyze_leaves_the_old_report_or_the_new_one(with_first: Path, tmp_path: Path, point: str) -> None:
    folder = _copy(with_first, tmp_path)
    out = tmp_path / "report"
    first = run_cli("analyze", str(SECOND), "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert first.returncode == 0, first.stderr
    before = (out / "analysis.md").read_bytes()
    # a new trace: the kill may land in its ingest ("staged", the ingest's publish) or after it
    killed = run_cli("analyze", str(THIRD), "--warehouse", str(folder), "--out", str(out), "--quiet",
                     env={CRASH_AT_ENV: point})
    assert killed.returncode == KILLED, killed.stderr
    now = (out / "analysis.md").read_bytes()
    assert now == before or point == "report-published", "the report changed before it was complete"
    assert (out / ".tracelake-output.json").is_file()
    again = run_cli("analyze", str(THIRD), "--warehouse", str(folder), "--out", str(out), "--quiet")
    assert again.returncode == 0, again.stderr
    assert [p.name for p in tmp_path.glob(".tracelake-*")] == []  # the dead run's staging is gone
    assert _leftovers(folder) == []
    with duckdb.connect(str(folder / "warehouse.duckdb"), read_only=True) as db:
        recorded = db.execute("select count(*) from analyses where out_dir = ?", [str(out)]).fetchone()[0]
        listed = db.execute("select count(*) from traces").fetchone()[0]
    assert (recorded, listed) == (1, 3)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for_children(pid: int, count: int, seconds: float = 60.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        children = _children(pid)
        if len(children) >= count:
            return children
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never had {count} children")


@pytest.mark.parametrize(("command", "children"), [("ingest", 1), ("analyze", 1)])
def test_children_die_with_their_parent(tmp_path: Path, command: str, children: int) -> None:
    out = ["--out", str(tmp_path / "out")] if command == "analyze" else []
    trace = tmp_path / "resnet_x3.json.gz"  # above two decode chunks: ingest forks decode workers
    assert write_repeated(BIG, trace, copies=3) > 2 * CHUNK_EVENTS
    process = subprocess.Popen([sys.executable, "-m", "tracelake", command, str(trace), "--warehouse",
                                str(tmp_path / "wh"), "--jobs", "2", "--quiet", *out],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "DO_NOT_TRACK": "1"})
    try:
        spawned = _wait_for_children(process.pid, children)
    finally:
        process.kill()
        process.wait()
    deadline = time.monotonic() + 10
    while any(_alive(child) for child in spawned) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(child) for child in spawned), "a child outlived its killed parent"
