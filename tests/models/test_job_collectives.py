"""The job marts and TraceLens-compatible collective CSVs on the shared 8-rank DLRM job, against
TraceLens' own report on the same files (../shared/traces/jobs/dlrm_8rank/expected/tracelens),
plus the parsing of 2024 collective args on a real rank and the dbt unit tests of the matching-key
choice and of the wait / arrival rule."""

from __future__ import annotations

import csv
import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import yaml

from tracelake.analyzers import settings
from tracelake.config import PROJECT_ROOT
from tracelake.core.errors import TraceLakeError
from tracelake.dbt_runner import run_dbt
from tracelake.ingestion import ingest_paths
from tracelake.reports.collective_csvs import write_collective_csvs
from tracelake.warehouse import Warehouse

JOBS = Path("/work/shared/traces/jobs")
DLRM = JOBS / "dlrm_8rank"
EXPECTED = DLRM / "expected" / "tracelens"
NCCL_2024 = JOBS / "single_ranks" / "nccl_data__rank0_of_2__a100_2024.json.gz"

pytestmark = pytest.mark.skipif(not DLRM.is_dir(), reason="the shared job traces are not on this machine")


@pytest.fixture(scope="module")
def job_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("job_warehouse"))
    assert not ingest_paths([DLRM], wh, tags={"job": "dlrm"}, jobs=2).failed
    assert not ingest_paths([NCCL_2024], wh, tags={"job": "nccl_2024"}, jobs=1).failed
    return wh


@pytest.fixture(scope="module")
def db(job_warehouse: Warehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(str(job_warehouse.db_path), read_only=True)
    yield connection
    connection.close()


@pytest.fixture(scope="module")
def csvs(db: duckdb.DuckDBPyConnection, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("collective_report")
    write_collective_csvs(db, "dlrm", folder)
    return folder


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _number(text: str) -> float | None:
    return float(text) if text != "" else None


def test_straggler_summary_equals_tracelens_in_every_column(csvs: Path) -> None:
    ours, theirs = _rows(csvs / "straggler_summary.csv"), _rows(EXPECTED / "straggler_summary.csv")
    assert list(ours[0]) == list(theirs[0])  # the same columns, in order
    assert [{k: _number(v) for k, v in row.items()} for row in ours] == \
        [{k: _number(v) for k, v in row.items()} for row in theirs]
    assert ours[0]["rank"] == "7" and ours[0]["times_arrived_last"] == "5" and ours[0]["total_wait_time_us"] == "1534"
    assert ours[-1]["rank"] == "1" and ours[-1]["total_wait_time_us"] == "11125"


def test_nccl_implicit_sync_equals_tracelens_per_collective(csvs: Path) -> None:
    ours, theirs = _rows(csvs / "nccl_implicit_sync.csv"), _rows(EXPECTED / "nccl_implicit_sync.csv")
    assert list(ours[0]) == list(theirs[0])
    assert len(ours) == len(theirs) == 8
    compared = ["collective_id", "Process Group Name", "comm_latency", "skew in start time", "earliest arrival rank",
                "avg_wait_time", "skew in end time"]
    compared += [f"rank_{r}_{c}" for r in range(8) for c in ("ts", "dur", "wait_time")]
    for mine, reference in zip(ours, theirs, strict=True):
        assert {c: _number(mine[c]) if c != "Process Group Name" else mine[c] for c in compared} == \
            {c: _number(reference[c]) if c != "Process Group Name" else reference[c] for c in compared}
    assert max(float(row["skew in start time"]) for row in ours) == 7624


def test_names_and_message_sizes_are_filled_from_the_annotations(csvs: Path, db: duckdb.DuckDBPyConnection) -> None:
    ours = _rows(csvs / "nccl_implicit_sync.csv")
    assert [row["Collective name"] for row in ours] == ["all_to_all"] * 4 + ["all_reduce", "all_to_all"] + ["all_reduce"] * 2
    # the all_reduce of 394241 floats: 1,576,964 bytes, on the 8 ranks of the world
    all_reduce = ours[4]
    assert (all_reduce["dtype"], all_reduce["In msg nelems"], all_reduce["Group size"]) == ("float", "394241", "8")
    assert float(all_reduce["Full msg size (MB)"]) == pytest.approx(1576964 / 2**20, rel=1e-12)
    # TraceLens' GiB/s: MB / 1024 / s over the fastest rank's 86 us; bus = x 2(n-1)/n
    assert float(all_reduce["algo bw (GB/s)"]) == pytest.approx(1576964 / 2**30 / 86e-6, rel=1e-12)
    assert float(all_reduce["bus bw (GB/s)"]) == pytest.approx(1576964 / 2**30 / 86e-6 * 14 / 8, rel=1e-12)
    instance = db.execute("""
        select collective_name, collective_kind, msg_bytes, algo_gb_per_s, node_span, is_desync, match_method
        from collective_instances where job_id = 'dlrm' and index_in_group = 4""").fetchone()
    assert instance == ("allreduce", "implicit_sync", 1576964, pytest.approx(1576964 / 86 / 1000), "intra_node",
                        False, "stream_ordinal")
    sources = db.execute("""
        select metadata_source, count(*) from collective_calls where job_id = 'dlrm' group by all""").fetchall()
    assert sources == [("annotation", 64)]


def test_nccl_long_equals_tracelens_in_time_and_order(csvs: Path) -> None:
    ours, theirs = _rows(csvs / "nccl_long.csv"), _rows(EXPECTED / "nccl_long.csv")
    assert list(ours[0]) == list(theirs[0])
    compared = ["collective_id", "index_in_group", "rank", "Process Group Name", "stream", "ts", "dur", "node_id"]
    assert [[row[c] for c in compared] for row in ours] == [[row[c] for c in compared] for row in theirs]


def test_the_summaries_have_tracelens_columns(csvs: Path) -> None:
    summary = _rows(csvs / "nccl_summary_implicit_sync.csv")
    reference = _rows(EXPECTED / "nccl_summary_implicit_sync.csv")
    # TraceLens' column order, with its bandwidth aggregates, which it drops when every size is empty
    bandwidth = [f"{m} bw (GB/s)_{a}" for m in ("algo", "bus") for a in ("mean", "median", "min", "max")]
    expected_columns = list(reference[0])
    expected_columns[-2:-2] = bandwidth
    assert list(summary[0]) == expected_columns
    # its one 'Unknown' row splits by name, dtype and size once they are known; the totals agree
    assert sum(int(row["count"]) for row in summary) == int(reference[0]["count"]) == 8
    assert sum(float(row["Total comm latency (ms)"]) for row in summary) == pytest.approx(0.217)
    long_summary = _rows(csvs / "nccl_summary_long.csv")
    with (EXPECTED / "nccl_summary_long.csv").open() as handle:
        assert list(long_summary[0]) == next(csv.reader(handle))
    assert sum(int(row["operation_count"]) for row in long_summary) == 64  # TraceLens' is empty here


def test_all_to_all_instances_add_up_the_ranks_inputs(db: duckdb.DuckDBPyConnection) -> None:
    # the first all_to_all: 6144 floats on each of 8 ranks, from rank 1's start to rank 0's end
    row = db.execute("""
        select total_in_bytes, wall_us, size_imbalance, throughput_gib_per_s, hot_src_rank
        from alltoall_instances where job_id = 'dlrm' and instance_id = 'all:0'""").fetchone()
    assert row == (8 * 6144 * 4, 7635.0, 1.0, pytest.approx(8 * 6144 * 4 / 2**30 / 7635e-6), None)
    assert db.execute("select count(*) from alltoall_instances where job_id = 'dlrm'").fetchone() == (5,)


def test_the_job_row_states_its_clock(db: duckdb.DuckDBPyConnection) -> None:
    job = db.execute("""
        select world_size, rank_count, missing_ranks, node_count, epoch_us, clock_method, clock_uncertainty_us
        from jobs where job_id = 'dlrm'""").fetchone()
    assert job == (8, 8, [], 1, 1694127601000000, "absolute_ts", 1.0)
    offsets = db.execute("select node_id, offset_us, applied, collectives_used from job_clock_offsets "
                         "where job_id = 'dlrm'").fetchall()
    assert offsets == [(0, 0.0, False, 8)]


def test_2024_kernel_args_give_the_process_group(db: duckdb.DuckDBPyConnection) -> None:
    rows = db.execute("""
        select collective_name, dtype, count(*), min(msg_bytes), max(msg_bytes), any_value(pg_ranks),
            any_value(group_size), any_value(pg_desc), any_value(metadata_source), bool_or(pg_ranks_truncated)
        from collective_calls where job_id = 'nccl_2024' group by all order by 1, 2""").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [("allreduce", "Float", 15), ("broadcast", "Float", 3),
                                                  ("broadcast", "Long", 3)]
    by_name = {(r[0], r[1]): r for r in rows}
    assert by_name[("allreduce", "Float")][2] == 15
    assert by_name[("allreduce", "Float")][5:9] == ([0, 1], 2, "default_pg", "kernel_args")
    assert by_name[("broadcast", "Long")][3] == 53 * 8
    assert {r[9] for r in rows} == {False}


def test_an_unknown_job_is_one_clear_error(db: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    with pytest.raises(TraceLakeError, match="no job named 'nope'"):
        write_collective_csvs(db, "nope", tmp_path / "report")
    assert not (tmp_path / "report").exists()


def test_the_clock_floor_setting_is_the_dbt_var() -> None:
    variables = yaml.safe_load((PROJECT_ROOT / "dbt_project.yml").read_text())["vars"]
    assert variables["clock_offset_floor_us"] == settings.CLOCK_OFFSET_FLOOR_US


JOB_UNIT_TESTS = {
    "collective_fields_parse_from_every_source": "int_collective_kernels",
    "matching_takes_the_best_key_every_call_of_the_group_has": "int_job_collective_calls",
    "waits_and_arrivals_follow_tracelens_tie_rules": "collective_calls",
}


def test_the_matching_and_wait_unit_tests_pass(job_warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(job_warehouse.db_path, copy)
    models = sorted(set(JOB_UNIT_TESTS.values()))
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *(f"test_type:unit,{m}" for m in models)])
    statuses = {r.node.name: str(r.status) for r in result.results}
    assert {name: statuses.get(name) for name in JOB_UNIT_TESTS} == dict.fromkeys(JOB_UNIT_TESTS, "pass")
