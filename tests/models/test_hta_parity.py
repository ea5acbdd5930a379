"""The HTA parity marts against HTA 0.5.0's own numbers (tests/data/hta_reference/README.md) on the two
sampled ranks of HTA's test job and one A100 rank with GPU user annotations: to the last digit where
the definitions agree; where they differ (docs/divergences.md), the part that must agree. Read
through the Python API, so each call's frame is what a notebook gets."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import tracelake
from tests.conftest import HTA_TRACES
from tracelake.api import WarehouseHandle
from tracelake.core.errors import WarehouseError
from tracelake.dbt_runner import run_dbt
from tracelake.ingestion import ingest_paths
from tracelake.trace_frames import MAX_BARS
from tracelake.warehouse import Warehouse

REFERENCE = Path(__file__).parents[1] / "data" / "hta_reference"
RANKS = {0: HTA_TRACES / "sampled_rank-0.json.gz", 1: HTA_TRACES / "sampled_rank-1.json.gz"}
ANNOTATED = REFERENCE / "traces" / "nccl_data__rank0_of_2__a100_2024.json.gz"
ONE_ULP = 5e-16  # relative: a double's last bit (2^-52 is 2.2e-16), for sums taken in another order
PARITY_MARTS = ("stream_queue_lengths", "stream_queue_summary", "memcpy_bandwidth_series", "memcpy_bandwidth_summary",
                "kernel_launch_stats", "stream_idle_breakdown", "gpu_annotation_breakdown", "kernel_sequences")
UNIT_TESTS = {
    "stream_queue_lengths_count_launched_ops_until_they_start": "stream_queue_lengths",
    "memcpy_bandwidth_series_adds_overlapping_copies_and_prefers_the_recorded_bandwidth": "memcpy_bandwidth_series",
    "stream_idle_breakdown_splits_host_kernel_and_other_waits": "stream_idle_breakdown",
    "kernel_sequences_count_overlapping_runs_per_stream": "kernel_sequences",
}


@pytest.fixture(scope="module")
def hta_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("hta_parity"))
    report = ingest_paths([*RANKS.values(), ANNOTATED], wh, tags={"suite": "hta_parity"}, jobs=2)
    assert not report.failed, report.failed
    return wh


@pytest.fixture(scope="module")
def wh(hta_warehouse: Warehouse) -> WarehouseHandle:
    return tracelake.open(hta_warehouse.root)


def _reference(name: str) -> pl.DataFrame:
    return pl.read_csv(REFERENCE / name)


def test_the_parity_marts_unit_and_data_tests_pass(hta_warehouse: Warehouse, tmp_path: Path) -> None:
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on: a copy
    shutil.copyfile(hta_warehouse.db_path, copy)
    # run_dbt raises, with the failing tests' messages, when one fails
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *PARITY_MARTS])
    statuses = {r.node.name: str(r.status) for r in result.results}
    assert {name: statuses.get(name) for name in UNIT_TESTS} == dict.fromkeys(UNIT_TESTS, "pass")
    assert len(statuses) > len(UNIT_TESTS) + 2 * len(PARITY_MARTS)  # the yml's data tests ran too
    assert set(statuses.values()) == {"pass"}


def test_queue_length_summary_is_htas_to_the_last_digit(wh: WarehouseHandle) -> None:
    hta = _reference("queue_length_summary.csv")
    for rank, trace in RANKS.items():
        ours = wh.queue_summary(str(trace)).frame
        expected = hta.filter(pl.col("rank") == rank).sort("stream")
        assert ours["stream"].to_list() == expected["stream"].to_list()
        assert ours["change_count"].to_list() == expected["count"].cast(pl.Int64).to_list()
        for mine, theirs in (("mean_queue_length", "mean"), ("min_queue_length", "min"), ("p25_queue_length", "25%"),
                             ("median_queue_length", "50%"), ("p75_queue_length", "75%"),
                             ("max_queue_length", "max")):
            assert ours[mine].cast(pl.Float64).to_list() == expected[theirs].to_list(), (rank, mine)
        # pandas and DuckDB sum in different orders: the last bit may differ
        assert ours["std_queue_length"].to_list() == pytest.approx(expected["std"].to_list(), rel=ONE_ULP)
        assert ours["blocked_on_full_queue_us"].to_list() == [0.0] * ours.height  # never 1024 queued
    assert _reference("time_spent_blocked_on_full_queue.csv").height == 0  # nor in HTA


def test_queue_length_series_steps_like_htas(wh: WarehouseHandle) -> None:
    for rank, trace in RANKS.items():
        ours = wh.queue_length(str(trace)).frame
        hta = _reference(f"queue_length_time_series_rank{rank}.csv")
        for stream in hta["stream"].unique().to_list():
            theirs = hta.filter(pl.col("stream") == stream)
            mine = ours.filter(pl.col("stream") == stream)
            assert mine["queue_length"].to_list() == theirs["queue_length"].to_list(), (rank, stream)
            # HTA's clock starts at the job's first event: compare the steps' lengths
            assert mine["ts_us"].diff().drop_nulls().to_list() == theirs["ts"].diff().drop_nulls().cast(
                pl.Float64).to_list()


def test_time_blocked_at_a_queue_limit_is_htas(wh: WarehouseHandle) -> None:
    # at the default limit (1024) no stream here fills; HTA's call with max_queue_length=8 gives
    # stream 25 of each rank, and the series' held_us gives the same time at or above 8
    hta = _reference("time_spent_blocked_on_full_queue_max8.csv")
    for rank, trace in RANKS.items():
        series = wh.queue_length(str(trace)).frame
        blocked = series.filter((pl.col("stream") == 25) & (pl.col("queue_length") >= 8))["held_us"].sum()
        assert blocked == hta.filter(pl.col("rank") == rank)["duration_at_max_queue_length"].item()


def test_memory_bandwidth_is_htas(wh: WarehouseHandle) -> None:
    hta = _reference("memory_bw_summary.csv")
    for rank, trace in RANKS.items():
        ours = wh.memory_bandwidth_summary(str(trace)).frame.sort("copy_kind")
        expected = hta.filter(pl.col("rank") == rank).sort("name")
        assert ours["copy_kind"].to_list() == expected["name"].to_list()
        assert ours["point_count"].to_list() == expected["count"].cast(pl.Int64).to_list()
        for mine, theirs in (("max_gb_per_s", "max"), ("min_gb_per_s", "min"), ("median_gb_per_s", "50%")):
            assert ours[mine].to_list() == expected[theirs].to_list(), (rank, mine)
        for mine, theirs in (("mean_gb_per_s", "mean"), ("std_gb_per_s", "std"), ("p25_gb_per_s", "25%"),
                             ("p75_gb_per_s", "75%")):  # sums: the last bit may differ
            assert ours[mine].to_list() == pytest.approx(expected[theirs].to_list(), rel=ONE_ULP), (rank, mine)
        series = wh.memory_bandwidth(str(trace)).frame
        theirs = _reference(f"memory_bw_time_series_rank{rank}.csv")
        for kind in expected["name"].to_list():  # the recorded bandwidths, summed in the same order
            assert series.filter(pl.col("copy_kind") == kind)["gb_per_s"].to_list() == theirs.filter(
                pl.col("name") == kind)["memory_bw_gbps"].to_list()


def test_launch_stats_are_htas_per_correlation(wh: WarehouseHandle) -> None:
    for rank, trace in RANKS.items():
        ours = wh.launch_stats(str(trace)).frame
        hta = _reference(f"cuda_kernel_launch_stats_rank{rank}.csv")
        joined = hta.join(ours, on="correlation", how="left")
        assert joined.height == hta.height == ours.height  # every op HTA counts, and no other
        assert joined["cpu_duration_us"].to_list() == joined["cpu_duration"].to_list()
        assert joined["gpu_duration_us"].to_list() == joined["gpu_duration"].to_list()
        assert joined["launch_delay_us"].to_list() == joined["launch_delay"].to_list()


def test_idle_breakdown_per_stream_is_htas(wh: WarehouseHandle) -> None:
    hta = _reference("idle_time_breakdown.csv")
    for rank, trace in RANKS.items():
        ours = wh.idle_breakdown(str(trace)).frame.select("stream", "idle_category", "idle_us", "idle_share")
        joined = hta.filter(pl.col("rank") == rank).join(ours, on=["stream", "idle_category"], how="left")
        matched = joined.filter(pl.col("idle_us").is_not_null())
        assert matched["idle_us"].to_list() == matched["idle_time"].to_list()
        assert [round(s, 2) for s in matched["idle_share"].to_list()] == matched["idle_time_ratio"].to_list()
        # HTA's only extra rows: a stream's first op (no gap before it) summed as 0 us of `other`
        assert joined.filter(pl.col("idle_us").is_null())["idle_time"].to_list() == [0.0] * (
            joined.height - matched.height)
        assert ours.height == matched.height


def test_gpu_annotation_breakdown_is_htas_but_for_its_whole_microsecond_rounding(
        wh: WarehouseHandle, hta_warehouse: Warehouse) -> None:
    hta = _reference("gpu_user_annotation_breakdown_a100_nccl_data.csv").sort("name")
    ours = wh.annotation_breakdown(str(ANNOTATED)).frame.sort("name")
    assert ours["name"].to_list() == hta["name"].to_list()
    # HTA moves each nanosecond-resolution event inward to whole µs (start up, end down): each
    # annotation's duration loses under 2 µs there, never more
    counts = dict(zip(ours["name"].to_list(), ours["annotation_count"].to_list(), strict=True))
    for name, total, theirs in zip(ours["name"], ours["total_us"], hta["sum (us)"], strict=True):
        assert 0 <= total - theirs < 2 * counts[name]
    with hta_warehouse.connect_read_only() as con:
        rounded = dict(con.execute(
            "select name, sum(floor(ts_us + dur_us) - ceil(ts_us)) from events e join traces t using (trace_id) "
            "where t.file_name = ? and e.category = 'gpu_user_annotation' group by name", [ANNOTATED.name]).fetchall())
    assert {name: rounded[name] for name in hta["name"]} == dict(zip(hta["name"], hta["sum (us)"], strict=True))


def test_kernel_sequences_cover_every_run_of_three_kernels(wh: WarehouseHandle) -> None:
    for trace in RANKS.values():
        sequences = wh.kernel_sequences(str(trace)).frame
        kernels = wh.table("kernels", trace=str(trace)).filter(pl.col("category") == "kernel")
        per_stream = kernels.group_by("device", "stream").len()["len"].to_list()
        assert sequences["occurrences"].sum() == sum(max(n - 2, 0) for n in per_stream)
        assert sequences["total_gpu_time_us"].to_list() == sorted(sequences["total_gpu_time_us"], reverse=True)
        top = sequences.row(0, named=True)
        assert top["avg_gpu_time_us"] == pytest.approx(top["total_gpu_time_us"] / top["occurrences"])
        assert "ncclKernel_SendRecv" in top["sequence"]  # these ranks spend most GPU time in collectives


def test_each_call_plots_a_figure_and_a_selector_naming_two_traces_is_refused(wh: WarehouseHandle) -> None:
    figure = wh.queue_length(str(RANKS[0])).plot()
    axes = figure.axes[0]
    assert {line.get_label() for line in axes.get_lines()} == {"7", "23", "25", "84", "203"}
    assert max(max(line.get_ydata()) for line in axes.get_lines()) == 80  # stream 7's deepest queue
    assert wh.idle_breakdown(str(RANKS[1])).plot().axes[0].get_legend() is not None
    bars = wh.kernel_sequences(str(RANKS[0])).plot().axes[0].patches  # the top sequences, longest at the top
    widths = [bar.get_width() for bar in sorted(bars, key=lambda bar: -bar.get_y())]
    assert len(widths) == MAX_BARS and widths == sorted(widths, reverse=True)
    with pytest.raises(WarehouseError, match="names 3 traces"):
        wh.queue_length("suite=hta_parity")
