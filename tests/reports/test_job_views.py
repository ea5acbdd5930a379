"""A job everywhere else (issue 24 item 6), on the real 8-rank DLRM job (tests/data/jobs/dlrm_8rank):
the dashboard's jobs, `compare job:A job:B`, the Python API's job frames and `export job:NAME`.

Known answers: TraceLens' collective report on the same files
(../shared/traces/jobs/dlrm_8rank/expected/tracelens: straggler_summary.csv, nccl_implicit_sync.csv),
each rank's ProfilerStep#N read from its file, and a copy of the job whose NCCL kernels last twice as
long (tests/reports/trace_variants.py), whose collective latencies must double.
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest

import tracelake
from tests.conftest import DATA, run_cli
from tests.reports.trace_variants import write_slower_run
from tracelake.core.errors import WarehouseError
from tracelake.dbt_runner import run_dbt
from tracelake.reports.dashboard import DATA_JSON, INDEX
from tracelake.reports.dashboard_data import DashboardData
from tracelake.warehouse import Warehouse

DLRM = DATA / "jobs" / "dlrm_8rank"
JOB = "dlrm_8rank"
SLOW_JOB = "dlrm_slow_nccl"
NCCL_FACTOR = 2.0
# TraceLens straggler_summary.csv: rank -> (total_wait_time_us, times_arrived_last, total_nccl_dur_us)
TRACELENS_STRAGGLERS = {7: (1534, 5, 1746), 2: (3280, 0, 3492), 6: (3342, 0, 3558), 0: (5580, 0, 5798),
                        5: (6041, 2, 6251), 4: (6370, 1, 6587), 3: (9571, 0, 9774), 1: (11125, 0, 11336)}
# TraceLens nccl_implicit_sync.csv, per collective in start order: (comm_latency, skew in end time), µs
TRACELENS_COLLECTIVES = [(10, 2), (8, 2), (7, 1), (7, 2), (86, 5), (10, 3), (20, 5), (69, 7)]


def _ok(*args: str) -> str:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _refused(*args: str) -> str:
    result = run_cli(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _step_times_ms() -> dict[int, float]:
    """Each rank's ProfilerStep#N duration read from its file (the oracle of the step-time spread)."""
    times = {}
    for path in sorted(DLRM.glob("*.json.gz")):
        trace = json.loads(gzip.decompress(path.read_bytes()))
        steps = [e["dur"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
        times[trace["distributedInfo"]["rank"]] = statistics.median(steps) / 1000.0
    return times


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("job_views")
    wh = root / "warehouse"
    for path in sorted(DLRM.glob("*.json.gz")):  # the same job, each rank's NCCL kernels twice as long
        write_slower_run(path, root / SLOW_JOB / path.name, "^ncclKernel", NCCL_FACTOR)
    _ok("ingest", str(DLRM), "--warehouse", str(wh), "--quiet")
    _ok("ingest", str(root / SLOW_JOB), "--warehouse", str(wh), "--quiet")
    return wh


@pytest.fixture(scope="module")
def page(warehouse: Path) -> tuple[DashboardData, str]:
    out = warehouse.parent / "page"
    _ok("dashboard", "--warehouse", str(warehouse), "--out", str(out))
    return DashboardData.model_validate_json((out / DATA_JSON).read_text()), (out / INDEX).read_text()


# ---- the dashboard --------------------------------------------------------------------------------

def test_dashboard_has_one_row_per_job_with_the_tracelens_straggler(page: tuple[DashboardData, str]) -> None:
    data, html = page
    assert [j.job_id for j in data.jobs] == [JOB, SLOW_JOB]
    job = data.jobs[0]
    assert (job.rank_count, job.world_size, job.missing_ranks) == (8, 8, [])
    assert job.straggler is not None
    assert (job.straggler.rank, job.straggler.times_arrived_last, job.straggler.collective_count) == (7, 5, 8)
    assert job.straggler.total_wait_ms == pytest.approx(1.534)
    assert 'id="jobs"' in html and "rank 7" in html and "last in 5 of 8 collectives" in html


def test_dashboard_spreads_equal_tracelens_and_the_step_annotations(page: tuple[DashboardData, str]) -> None:
    job = page[0].jobs[0]
    waits = {rank: wait / 1000 for rank, (wait, _, _) in TRACELENS_STRAGGLERS.items()}
    comms = {rank: comm / 1000 for rank, (_, _, comm) in TRACELENS_STRAGGLERS.items()}
    for metric, truth in (("wait", waits), ("communication", comms), ("step_time", _step_times_ms())):
        spread = job.spread(metric)
        assert spread is not None, metric
        assert (spread.min_ms, spread.median_ms, spread.max_ms) == pytest.approx(
            (min(truth.values()), statistics.median(truth.values()), max(truth.values()))), metric
        assert (spread.min_rank, spread.max_rank) == (min(truth, key=truth.__getitem__), max(truth, key=truth.__getitem__))


def test_dashboard_charts_the_collectives_of_each_rank(page: tuple[DashboardData, str]) -> None:
    data, _ = page
    job = data.jobs[0]
    assert job.categories[0] == "collectives"  # 62-91 % of each rank's kernel time
    for column in job.ranks:
        collectives = next(c for c in column.categories if c.category == "collectives")
        assert collectives.kernel_time_ms == pytest.approx(TRACELENS_STRAGGLERS[column.rank][2] / 1000), column.rank
    group = next(g for g in data.groups if g.model == JOB)  # the job's ranks are one run of its name
    assert len(group.runs) == 1 and sorted(group.runs[0].ranks) == list(range(8))
    assert "collectives" in group.categories


def test_job_marts_pass_their_dbt_unit_tests(suite_warehouse: Warehouse, tmp_path: Path) -> None:
    """Ties at both ends of a spread go to the lowest rank, a rank without a step time is left out of that
    metric only; the collectives charted by name and the smaller categories summed (dbt unit tests beside
    the marts, run on a copy of the warehouse)."""
    copy = tmp_path / "warehouse.duckdb"
    shutil.copyfile(suite_warehouse.db_path, copy)  # dbt runs on the classic layout; unit tests bring their rows
    selected = [f"{model},test_type:unit" for model in ("job_rank_spread", "job_rank_categories")]
    results = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *selected])
    assert sorted(r.node.name for r in results.results) == [
        "job_rank_categories_chart_the_collectives_and_sum_the_rest", "job_rank_spread_names_the_ranks_at_both_ends"]
    assert all(str(r.status) == "pass" for r in results.results)


# ---- compare --------------------------------------------------------------------------------------

def test_compare_a_job_with_itself_changes_nothing(warehouse: Path) -> None:
    result = run_cli("compare", f"job:{JOB}", f"job:{JOB}", "--format", "json", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["kind"] == "jobs" and not verdict["regression"]
    assert sum(s["baseline_count"] for s in verdict["signatures"]) == 8
    assert all(s["latency_change_percent"] == 0 for s in verdict["signatures"])
    assert all(s["median_change_percent"] == 0 for s in verdict["spreads"])


def test_compare_finds_the_doubled_collectives(warehouse: Path) -> None:
    result = run_cli("compare", f"job:{JOB}", f"job:{SLOW_JOB}", "--format", "json", "--warehouse", str(warehouse))
    assert result.returncode == 1, result.stderr  # a regression
    verdict = json.loads(result.stdout)
    assert "median rank's kernel time" in verdict["failures"]
    assert verdict["summary"].startswith(f"REGRESSION: job {SLOW_JOB} against job {JOB}: median rank's kernel time +")
    signatures = verdict["signatures"]
    assert all(s["status"] == "both" and s["baseline_count"] == s["candidate_count"] for s in signatures)
    latencies = sorted(lat for lat, _ in TRACELENS_COLLECTIVES)
    assert sorted(s["baseline_latency_us"] for s in signatures for _ in range(s["baseline_count"])) == latencies
    for signature in signatures:
        assert signature["candidate_latency_us"] == pytest.approx(NCCL_FACTOR * signature["baseline_latency_us"])
        assert signature["candidate_bus_gb_per_s"] == pytest.approx(signature["baseline_bus_gb_per_s"] / NCCL_FACTOR)
    communication = next(s for s in verdict["spreads"] if s["metric"] == "communication")
    assert communication["candidate_max_ms"] == pytest.approx(NCCL_FACTOR * communication["baseline_max_ms"], rel=1e-3)
    markdown = _ok("compare", f"job:{JOB}", f"job:{JOB}", "--warehouse", str(warehouse))
    assert markdown.startswith("OK: job dlrm_8rank") and "| `allreduce float` | 1,576,964 |" in markdown


def test_compare_refuses_a_job_against_a_trace(warehouse: Path) -> None:
    trace = DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz"
    line = _refused("compare", f"job:{JOB}", str(trace), "--warehouse", str(warehouse))
    assert "not a job" in line and "job:NAME job:NAME" in line
    assert "not a job" in _refused("compare", str(trace), f"job:{JOB}", "--warehouse", str(warehouse))
    assert "no job 'nope'" in _refused("compare", "job:nope", f"job:{JOB}", "--warehouse", str(warehouse))


def test_job_selector_names_the_ranks_in_rank_order(warehouse: Path) -> None:
    printed = _ok("rm", f"job:{SLOW_JOB}", "--dry-run", "--warehouse", str(warehouse))
    with tracelake.open(warehouse) as wh:
        ranks = wh.job(SLOW_JOB).ranks()
    listed = [line.split()[0] for line in printed.splitlines()[3:-1]]  # the table's rows, after its header
    assert printed.startswith(f"would remove {len(ranks)} traces") and listed == ranks["trace_id"].to_list()
    assert ranks["rank"].to_list() == list(range(8))


# ---- the Python API -------------------------------------------------------------------------------

def test_api_returns_job_frames(warehouse: Path) -> None:
    with tracelake.open(warehouse) as wh:
        assert wh.jobs()["job_id"].to_list() == [JOB, SLOW_JOB]
        job = wh.job(JOB)
        ranks = job.ranks()
        assert ranks["rank"].to_list() == list(range(8))
        assert dict(zip(ranks["rank"], ranks["wait_ms"], strict=True)) == pytest.approx(
            {rank: wait / 1000 for rank, (wait, _, _) in TRACELENS_STRAGGLERS.items()})
        stragglers = job.stragglers()
        assert stragglers["rank"].to_list() == list(TRACELENS_STRAGGLERS)  # TraceLens' order: least wait first
        instances = job.instances()
        assert [(round(lat), round(skew)) for lat, skew in zip(instances["comm_latency_us"], instances["end_skew_us"],
                                                                strict=True)] == TRACELENS_COLLECTIVES
        assert job.collectives().height == 64 and job.spread().height == 4
        with pytest.raises(WarehouseError, match="no job 'nope'.*dlrm_8rank"):
            wh.job("nope")


# ---- export ---------------------------------------------------------------------------------------

def _nccl_by_rank(events: list[dict]) -> dict[int, list[dict]]:
    kernels: dict[int, list[dict]] = {}
    for event in sorted((e for e in events if e["ph"] == "X" and e["name"].startswith("ncclKernel")),
                        key=lambda e: e["ts"]):
        kernels.setdefault(event["pid"], []).append(event)
    return kernels


def test_export_lines_up_the_collectives_of_every_rank(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "job.json"
    printed = _ok("export", f"job:{JOB}", "--out", str(out), "--warehouse", str(warehouse))
    assert "8 ranks" in printed
    document = json.loads(out.read_text())
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {rank: f"rank {rank}" for rank in range(8)}
    assert all(isinstance(e["pid"], int) and isinstance(e["tid"], int) for e in events)
    kernels = _nccl_by_rank(events)
    assert sorted(kernels) == list(range(8)) and {len(k) for k in kernels.values()} == {8}
    for index, (latency, end_skew) in enumerate(TRACELENS_COLLECTIVES):
        ends = [kernels[rank][index]["ts"] + kernels[rank][index]["dur"] for rank in range(8)]
        durations = [kernels[rank][index]["dur"] for rank in range(8)]
        assert max(ends) - min(ends) == pytest.approx(end_skew, abs=0.01), index  # the job's end skew
        assert min(durations) == pytest.approx(latency), index
    with tracelake.open(warehouse) as wh:  # on the job clock, as collective_calls has it
        calls = wh.job(JOB).collectives().sort(["rank", "start_us"])
    exported = [(rank, k["ts"]) for rank in range(8) for k in kernels[rank]]
    assert exported == [(r, pytest.approx(s)) for r, s in zip(calls["rank"], calls["start_us"], strict=True)]


def test_an_exported_window_holds_every_rank_and_ingests_back(warehouse: Path, tmp_path: Path) -> None:
    with tracelake.open(warehouse) as wh:
        allreduce = wh.job(JOB).instances().filter(comm_latency_us=86.0)
    start, end = allreduce["first_start_us"][0], allreduce["last_end_us"][0]
    out = tmp_path / "window.json.gz"
    _ok("export", f"job:{JOB}", "--window", f"{start}:{end}", "--out", str(out), "--warehouse", str(warehouse))
    document = json.loads(gzip.decompress(out.read_bytes()))
    timed = [e for e in document["traceEvents"] if e["ph"] != "M"]
    assert {e["pid"] for e in timed} == set(range(8))
    assert all(e["ts"] <= end and e["ts"] + e.get("dur", 0) >= start for e in timed)
    assert {len(k) for k in _nccl_by_rank(timed).values()} == {1}  # the one allreduce on each rank
    assert document["tracelake_export"]["job_id"] == JOB
    back = tmp_path / "back"
    _ok("ingest", str(out), "--warehouse", str(back), "--quiet")
    kernels = _ok("sql", "select count(*) from kernels where name like 'ncclKernel%'", "--warehouse", str(back),
                  "--format", "csv")
    assert kernels.split()[-1] == "8"


@pytest.mark.parametrize(("args", "needle"), [
    (["--window", "5:1"], "END must be after START"),
    (["--window", "1:2"], "holds none of job dlrm_8rank"),
    (["--step", "10"], "--window START:END"),
])
def test_export_of_a_job_refuses_bad_windows(warehouse: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    line = _refused("export", f"job:{JOB}", *args, "--out", str(tmp_path / "x.json"), "--warehouse", str(warehouse))
    assert needle in line
