"""The per-rank job marts on the real 8-rank DLRM job (tests/data/jobs/dlrm_8rank): job_rank_breakdown
against HTA 0.5.0's get_comm_comp_overlap and get_temporal_breakdown, collective_preceding_work
against the windows recomputed from the raw trace files, collective_signatures against TraceLens'
straggler summary, and the dbt unit tests of the overlap rule and the bound classes."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
from pathlib import Path

import duckdb
import pytest
import yaml

from tracelake.analyzers import settings
from tracelake.dbt_runner import run_dbt
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

JOB_DIR = Path(__file__).parents[1] / "data" / "jobs" / "dlrm_8rank"
EXPECTED = JOB_DIR / "expected"
JOB = "dlrm_8rank"
PROJECT_VARS = yaml.safe_load((Path(__file__).parents[2] / "dbt_project.yml").read_text())["vars"]

# unit test -> the model it tests
UNIT_TESTS = {
    "rank_breakdown_overlap_and_kernel_classes": "int_rank_time_breakdown",
    "collective_bound_classes_at_their_thresholds": "collective_signatures",
}


@pytest.fixture(scope="module")
def dlrm_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """The 8 ranks ingested as one job: the `job` tag; job_ranks takes each rank from distributedInfo."""
    wh = Warehouse(tmp_path_factory.mktemp("dlrm_job"))
    report = ingest_paths([JOB_DIR], wh, tags={"job": JOB}, jobs=2)
    assert not report.failed, report.failed
    return wh


@pytest.fixture(scope="module")
def dlrm_db(dlrm_warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    con = dlrm_warehouse.connect_read_only()
    yield con
    con.close()


def _expected(name: str) -> dict[int, dict[str, float]]:
    with (EXPECTED / name).open() as handle:
        return {int(row["rank"]): {k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)}


def _rows(db: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, object]]:
    cursor = db.execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def test_the_overlap_is_htas_on_every_rank(dlrm_db: duckdb.DuckDBPyConnection) -> None:
    expected = _expected("hta/comm_comp_overlap.csv")
    rows = _rows(dlrm_db, f"select rank, comm_comp_overlap_percent from job_rank_breakdown where job_id = '{JOB}'")
    measured = {row["rank"]: row["comm_comp_overlap_percent"] for row in rows}
    assert sorted(measured) == sorted(expected) == list(range(8))
    for rank, hta in expected.items():
        # HTA rounds to 2 decimals; the acceptance bar is 0.5 points, we are within the rounding
        assert measured[rank] == pytest.approx(hta["comp_comm_overlap_pctg"], abs=0.005), rank


def test_the_temporal_breakdown_is_htas_on_every_rank(dlrm_db: duckdb.DuckDBPyConnection) -> None:
    expected = _expected("hta/temporal_breakdown.csv")
    rows = _rows(dlrm_db, f"""select rank, idle_us, computation_us, non_compute_us, span_us, idle_time_percent,
                                     compute_time_percent, non_compute_time_percent
                              from job_rank_breakdown where job_id = '{JOB}'""")
    assert len(rows) == 8
    for row in rows:
        hta = expected[int(row["rank"])]
        # whole microseconds on both sides: exactly equal
        assert (row["idle_us"], row["computation_us"], row["non_compute_us"], row["span_us"]) == (
            hta["idle_time(us)"], hta["compute_time(us)"], hta["non_compute_time(us)"], hta["kernel_time(us)"])
        for ours, theirs in (("idle_time_percent", "idle_time_pctg"), ("compute_time_percent", "compute_time_pctg"),
                             ("non_compute_time_percent", "non_compute_time_pctg")):
            assert row[ours] == pytest.approx(hta[theirs], abs=0.005), (row["rank"], ours)


def _raw_windows(trace: Path) -> dict[int, tuple[float, float, float]]:
    """From the raw file, per communication kernel (by position among them in start order): the
    window since the previous one ended, the other GPU events' time clipped to it, and the time
    no GPU event covers in it. An oracle written apart from the SQL."""
    events = [e for e in json.loads(gzip.open(trace).read())["traceEvents"]
              if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"]), bool(re.search("nccl", e["name"], re.I)))
                   for e in events)
    first_start = spans[0][0]
    comms = [(start, end) for start, end, is_comm in spans if is_comm]
    windows: dict[int, tuple[float, float, float]] = {}
    for ordinal, (start, _) in enumerate(comms, 1):
        opened = min(max([end for _, end in comms[:ordinal - 1]], default=first_start), start)
        work = sum(max(0.0, min(e, start) - max(s, opened)) for s, e, is_comm in spans if not is_comm)
        covered, reach = 0.0, opened
        for s, e, _ in spans:  # union of every GPU event inside [opened, start)
            s, e = max(s, reach), min(e, start)
            if e > s:
                covered, reach = covered + e - s, e
        windows[ordinal] = (start - opened, work, start - opened - covered)
    return windows


def test_the_work_before_each_collective_is_the_raw_traces(dlrm_db: duckdb.DuckDBPyConnection) -> None:
    rows = _rows(dlrm_db, f"""
        select j.rank, w.comm_ordinal, any_value(w.window_us) as window_us,
            coalesce(sum(w.kernel_us), 0) as kernel_us, sum(w.idle_us) as idle_us,
            count(*) filter (where w.instance_id is null or w.job_id <> '{JOB}' or w.rank <> j.rank) as unmatched
        from collective_preceding_work as w
        inner join job_ranks as j on w.trace_id = j.trace_id
        where j.job_id = '{JOB}'
        group by j.rank, w.comm_ordinal""")
    by_rank: dict[int, dict[int, tuple[float, float, float]]] = {}
    for row in rows:
        assert row["unmatched"] == 0  # every row carries its job, rank and collective instance
        by_rank.setdefault(int(row["rank"]), {})[int(row["comm_ordinal"])] = (
            row["window_us"], row["kernel_us"], row["idle_us"])
    files = sorted(JOB_DIR.glob("worker*.json.gz"))
    assert len(by_rank) == len(files) == 8
    for trace in files:
        rank = int(re.match(r"worker(\d+)_", trace.name).group(1))
        assert by_rank[rank] == _raw_windows(trace), rank  # whole microseconds: exactly


def test_the_straggler_outworks_the_median_rank_before_its_late_collectives(
        dlrm_db: duckdb.DuckDBPyConnection) -> None:
    # TraceLens: rank 7 arrives last at 5 of the 8 collectives; before those it has more host and GPU
    # work since the previous collective than the median of the other ranks
    rows = _rows(dlrm_db, f"""
        with late as (
            select instance_id from collective_instances where job_id = '{JOB}' and last_arrival_rank = 7
        ),
        per_rank as (
            select w.rank, sum(w.window_us) filter (where w.work_side = 'gpu_idle') as window_us
            from collective_preceding_work as w inner join late using (instance_id)
            where w.job_id = '{JOB}'
            group by w.rank
        )
        select count(*) filter (where rank = 7) as straggler_rows,
            max(window_us) filter (where rank = 7) as straggler_window_us,
            median(window_us) filter (where rank <> 7) as median_window_us,
            (select count(*) from late) as late_collectives
        from per_rank""")
    assert rows[0]["late_collectives"] == 5 and rows[0]["straggler_rows"] == 1
    assert rows[0]["straggler_window_us"] > rows[0]["median_window_us"]


def test_the_signatures_hold_every_collective_and_tracelens_waits(dlrm_db: duckdb.DuckDBPyConnection) -> None:
    with (EXPECTED / "tracelens" / "straggler_summary.csv").open() as handle:
        tracelens_wait = sum(float(row["total_wait_time_us"]) for row in csv.DictReader(handle))
    rows = _rows(dlrm_db, f"""select sum(instance_count) as instances, sum(total_wait_us) as total_wait_us,
                                     count(*) filter (where peak_bus_gb_per_s = 150) as with_nvlink_peak,
                                     count(*) as signatures,
                                     count(*) filter (where instance_count < {settings.COLLECTIVE_SIGNATURE_MIN_INSTANCES}
                                                      and median_wait_share <= {settings.COLLECTIVE_DECISIVE_WAIT_SHARE}
                                                      and bound <> 'inconclusive') as misclassified,
                                     count(*) filter (where median_wait_share > {settings.COLLECTIVE_DECISIVE_WAIT_SHARE}
                                                      and bound <> 'skew') as decisive_not_skew
                              from collective_signatures where job_id = '{JOB}'""")
    assert rows[0]["instances"] == 8
    assert rows[0]["total_wait_us"] == pytest.approx(tracelens_wait, abs=1.0)
    # one node of V100 SXM2: every signature is intra-node, against NVLink 2's 150 GB/s
    assert rows[0]["with_nvlink_peak"] == rows[0]["signatures"]
    assert rows[0]["misclassified"] == 0
    assert rows[0]["decisive_not_skew"] == 0


def test_the_bound_settings_are_the_models_vars() -> None:
    assert PROJECT_VARS["collective_skew_wait_share_min"] == settings.COLLECTIVE_SKEW_WAIT_SHARE_MIN
    assert PROJECT_VARS["collective_bandwidth_peak_share_min"] == settings.COLLECTIVE_BANDWIDTH_PEAK_SHARE_MIN
    assert PROJECT_VARS["collective_signature_min_instances"] == settings.COLLECTIVE_SIGNATURE_MIN_INSTANCES
    assert PROJECT_VARS["collective_decisive_wait_share"] == settings.COLLECTIVE_DECISIVE_WAIT_SHARE


def test_the_overlap_and_bound_unit_tests_run_and_pass(dlrm_warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(dlrm_warehouse.db_path, copy)
    models = sorted(set(UNIT_TESTS.values()))
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *(f"test_type:unit,{m}" for m in models)])
    statuses = {r.node.name: str(r.status) for r in result.results}
    assert {name: statuses.get(name) for name in UNIT_TESTS} == dict.fromkeys(UNIT_TESTS, "pass")
