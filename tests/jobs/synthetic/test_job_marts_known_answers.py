"""The job marts (docs/jobs.md) against synthetic jobs whose answers are known by construction
(issue 24, second acceptance line). Every expected figure comes from the planted values
(tests/jobs/planted_answers.py), never from TraceLake's output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

from tests.jobs.planted_answers import (
    alltoallv_answer,
    expected_calls,
    expected_instances,
    expected_straggler_summary,
)
from tests.jobs.synthetic.conftest import STRAGGLER, BuiltJob
from tests.jobs.synthetic_jobs import FP8_DTYPE, split_matrix

TOLERANCE_US = 0.005  # Kineto's ns resolution on a float64 clock of ~4.5e12 µs
JobWarehouse = Callable[[str], BuiltJob]


def mart_calls(job: BuiltJob) -> pl.DataFrame:
    """collective_calls of the job's collectives (not the planted p2p), with k = seq - 1."""
    rows = job.query(f"""
        select rank, seq, wait_us, dur_us, start_us, end_us, is_last_arrival, is_first_arrival, match_method,
               instance_id, collective_name, dtype, dtype_bytes, msg_bytes, group_size, pg_ranks,
               pg_ranks_truncated, splits_truncated, is_p2p
        from collective_calls where job_id = '{job.spec.name}' order by rank, start_us""")
    return pl.DataFrame(rows, infer_schema_length=None)


def mart_instances(job: BuiltJob) -> pl.DataFrame:
    """collective_instances of the job's collectives, with the seq their calls carry."""
    rows = job.query(f"""
        with seqs as (
            select distinct instance_id, seq from collective_calls where job_id = '{job.spec.name}' and not is_p2p
        )
        select seqs.seq, i.*
        from collective_instances i join seqs using (instance_id)
        where i.job_id = '{job.spec.name}' order by seqs.seq""")
    return pl.DataFrame(rows, infer_schema_length=None)


def _close(actual: Any, expected: Any, what: str) -> None:
    assert actual == pytest.approx(expected, abs=TOLERANCE_US, rel=1e-9), what


def assert_waits(job: BuiltJob) -> None:
    """Each rank's wait and duration in each collective, and who arrived last, as planted."""
    expected = expected_calls(job.spec, job.source)
    actual = mart_calls(job).filter(~pl.col("is_p2p"))
    joined = expected.join(actual, on=["rank", "seq"], how="left", suffix="_mart")
    assert actual.height == expected.height, f"{actual.height} collective calls, expected {expected.height}"
    for row in joined.to_dicts():
        where = f"{job.spec.name}: rank {row['rank']}, seq {row['seq']}"
        _close(row["wait_us_mart"], row["wait_us"], f"{where}: wait_us")
        _close(row["dur_us_mart"], row["dur_us"], f"{where}: dur_us")
        assert row["is_last_arrival"] == (row["wait_us"] == 0), f"{where}: is_last_arrival"


def test_planted_delays_give_each_ranks_wait(job_warehouse: JobWarehouse) -> None:
    assert_waits(job_warehouse("delays"))


def test_planted_delays_give_each_instances_skew_and_arrivals(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("delays")
    expected = expected_instances(job.spec, expected_calls(job.spec, job.source))
    actual = mart_instances(job)
    assert actual["seq"].to_list() == expected["seq"].to_list()
    for want, got in zip(expected.to_dicts(), actual.to_dicts()):
        where = f"instance seq {want['seq']} ({want['name']})"
        for column in ("comm_latency_us", "start_skew_us", "end_skew_us", "avg_wait_us"):
            _close(got[column], want[column], f"{where}: {column}")
        for column in ("earliest_arrival_rank", "last_arrival_rank", "ranks_present", "msg_bytes"):
            assert got[column] == want[column], f"{where}: {column}"
        assert (got["collective_name"], got["ranks_expected"], got["is_desync"]) == (want["name"], 8, False), where
        for column in ("algo_gb_per_s", "bus_gb_per_s", "algo_gib_per_s", "bus_gib_per_s"):
            assert got[column] == pytest.approx(want[column], rel=1e-5), f"{where}: {column}"


def test_planted_straggler_is_found_exactly(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("delays")
    expected = expected_straggler_summary(job.spec, expected_calls(job.spec, job.source))
    rows = job.query(f"select * from job_straggler_summary where job_id = '{job.spec.name}' order by rank")
    assert [r["rank"] for r in rows] == expected["rank"].to_list()
    for want, got in zip(expected.to_dicts(), rows):
        where = f"straggler summary rank {want['rank']}"
        for column in ("times_arrived_last", "times_arrived_first", "num_collectives"):
            assert got[column] == want[column], f"{where}: {column}"
        for column in ("total_wait_us", "mean_wait_us", "total_comm_us", "pct_arrived_last"):
            _close(got[column], want[column], f"{where}: {column}")
    last = max(rows, key=lambda r: r["times_arrived_last"])
    assert last["rank"] == STRAGGLER == min(rows, key=lambda r: r["total_wait_us"])["rank"]


def test_a_second_node_with_a_clock_offset_gives_the_unshifted_answers(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("two_nodes")
    offsets = {r["node_id"]: r for r in job.query(
        "select * from job_clock_offsets where job_id = 'two_nodes' order by node_id")}
    assert sorted(offsets) == [0, 1]
    _close(offsets[1]["offset_us"] - offsets[0]["offset_us"], 350.0, "node 1's offset against node 0")
    assert offsets[1]["applied"], "the 350 µs offset across nodes is applied"
    _close(offsets[1]["residual_us"], 0.0, "residual end skew after the offset")
    nodes = {r["rank"]: r["node_id"] for r in job.query("select rank, node_id from job_ranks where job_id = 'two_nodes'")}
    assert nodes == {rank: rank // 4 for rank in range(8)}
    assert_waits(job)  # the planted waits, i.e. those of the same job without the offset
    spans = {r["node_span"] for r in job.query("select node_span from collective_instances where job_id = 'two_nodes'")}
    assert spans == {"inter_node"}


def test_ranks_straddling_a_three_month_base_give_the_same_waits(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("trimonth")
    ranks = job.query("select rank, base_time_us, has_base_time from job_ranks where job_id = 'trimonth'")
    assert len(ranks) == 8 and all(r["has_base_time"] for r in ranks)
    [job_row] = job.query("select epoch_us, clock_method from jobs where job_id = 'trimonth'")
    assert job_row["epoch_us"] == min(r["base_time_us"] for r in ranks)
    assert_waits(job)
    # every call at its planted absolute time (source base + source ts + delay), odd ranks included
    source_base_us = int(job.source.header["baseTimeNanoseconds"]) // 1000
    expected = expected_calls(job.spec, job.source)
    actual = mart_calls(job).filter(~pl.col("is_p2p")).join(expected, on=["rank", "seq"], suffix="_planted")
    for row in actual.to_dicts():
        _close(job_row["epoch_us"] - source_base_us + row["start_us"], row["start_us_planted"],
               f"trimonth: rank {row['rank']}, seq {row['seq']}: absolute start")


@pytest.mark.parametrize(("name", "method"), [("p2p_comms_id", "comms_id"), ("p2p_seq", "pg_seq")])
def test_p2p_interleaved_in_the_group_is_matched_by_comms_id_or_seq(job_warehouse: JobWarehouse, name: str,
                                                                    method: str) -> None:
    job = job_warehouse(name)
    calls = mart_calls(job)
    assert set(calls["match_method"].to_list()) == {method}
    p2p = calls.filter(pl.col("is_p2p")).sort("rank")
    assert p2p.select("rank", "collective_name").rows() == [(0, "send"), (1, "recv")]
    assert p2p["instance_id"].n_unique() == 1, "the send and the recv are one instance"
    assert_waits(job)


def test_a_64_rank_group_rebuilds_its_truncated_rank_list(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("wide64")
    calls = mart_calls(job)
    assert calls.height == 64 * 21
    assert all(ranks == list(range(64)) for ranks in calls["pg_ranks"].to_list())
    assert calls["pg_ranks_truncated"].all() and set(calls["group_size"].to_list()) == {64}
    alltoallv = calls.filter(pl.col("seq") == 6)
    assert set(alltoallv["collective_name"].to_list()) == {"alltoallv"} and alltoallv["splits_truncated"].all()
    assert not calls.filter(pl.col("seq") != 6)["splits_truncated"].any()
    [alltoall] = job.query("select splits_truncated, total_in_bytes from alltoall_instances where job_id = 'wide64'")
    assert alltoall["splits_truncated"] and alltoall["total_in_bytes"] == int(split_matrix(job.spec).sum()) * 4
    assert job.query("select count(*) as n from alltoall_pairs where job_id = 'wide64'") == [{"n": 0}]
    assert_waits(job)


def test_fp8_messages_have_one_byte_elements_and_a_bandwidth(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("payloads")
    expected = expected_instances(job.spec, expected_calls(job.spec, job.source)).filter(pl.col("k").is_in(job.spec.fp8))
    actual = mart_instances(job).filter(pl.col("seq").is_in([k + 1 for k in job.spec.fp8]))
    assert actual.height == len(job.spec.fp8)
    for want, got in zip(expected.to_dicts(), actual.to_dicts()):
        assert (got["dtype"], got["msg_bytes"]) == (FP8_DTYPE, want["msg_bytes"]), f"FP8 instance seq {want['seq']}"
        for column in ("algo_gb_per_s", "bus_gb_per_s", "algo_gib_per_s", "bus_gib_per_s"):
            assert got[column] == pytest.approx(want[column], rel=1e-5), f"FP8 seq {want['seq']}: {column}"
    calls = mart_calls(job).filter(pl.col("seq").is_in([k + 1 for k in job.spec.fp8]))
    assert set(calls["dtype_bytes"].to_list()) == {1}


def test_an_all_to_allv_with_planted_imbalance_names_the_hot_pair(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("payloads")
    [k] = job.spec.alltoallv
    answer = alltoallv_answer(job.spec, job.source, k)
    [row] = job.query("select * from alltoall_instances where job_id = 'payloads'")
    assert row["size_imbalance"] == pytest.approx(answer["size_imbalance"], rel=1e-9), "size_imbalance"
    assert (row["hot_src_rank"], row["hot_dst_rank"]) == answer["hot_pair"], "hot pair"
    for column in ("hot_pair_bytes", "total_in_bytes"):
        assert row[column] == answer[column], column
    for column in ("wall_us", "start_skew_us"):
        _close(row[column], answer[column], column)
    for column in ("throughput_gb_per_s", "throughput_gib_per_s"):
        assert row[column] == pytest.approx(answer[column], rel=1e-6), column
    assert (row["ranks_present"], row["splits_truncated"]) == (8, False)
    pairs = job.query("select src_rank, dst_rank, bytes from alltoall_pairs where job_id = 'payloads'")
    planted = split_matrix(job.spec) * 4
    assert len(pairs) == 64 and all(p["bytes"] == planted[p["src_rank"], p["dst_rank"]] for p in pairs)


def test_a_rank_missing_a_collective_is_a_desync_row(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("desync")
    instances = mart_instances(job)
    desync = instances.filter(pl.col("is_desync"))
    assert desync["seq"].to_list() == [7]
    [row] = desync.to_dicts()
    assert (row["ranks_present"], row["ranks_expected"]) == (7, 8) and row["desync_reason"]
    assert instances.height == 21
    assert_waits(job)  # the other ranks' waits in that instance are over the 7 present


def test_a_job_of_2_of_128_ranks_is_analyzed_and_lists_the_missing(job_warehouse: JobWarehouse) -> None:
    job = job_warehouse("sparse128")
    [row] = job.query("select world_size, rank_count, missing_ranks from jobs where job_id = 'sparse128'")
    assert (row["world_size"], row["rank_count"]) == (128, 2)
    assert row["missing_ranks"] == [r for r in range(128) if r not in (0, 77)]
    assert len(row["missing_ranks"]) == 126
    assert_waits(job)
