"""The answers a synthetic job must give, computed from what was planted (never from TraceLake).

Rank r's collective k starts at the source rank's start + delta[r, k] and ends where the source's
ended (`synthetic_jobs.py`), so per instance: comm latency = min duration, wait_r = max start -
start_r, start skew = max wait, end skew = 0, earliest arrival = the largest wait, last arrival = wait 0
(the planted delays are distinct per collective: no ties). The straggler summary follows TraceLens (TL#599) over
the implicit-sync collectives (all-reduce here; broadcast is not one), its communication time over
every collective kernel. Times in µs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from tests.jobs.synthetic_jobs import FP8_DTYPE, JobSpec, SourceRank, planted_delays_ns, split_matrix

DTYPE_BYTES = {"Float": 4, "Long": 8, FP8_DTYPE: 1}
IMPLICIT_SYNC = ("allreduce", "allgather", "reducescatter", "alltoall")


def bus_factor(name: str, group_size: int) -> float:
    """nccl-tests' bus factor, as TraceLens applies it."""
    if name == "allreduce":
        return 2 * (group_size - 1) / group_size
    if name in ("allgather", "reducescatter", "alltoall", "alltoallv"):
        return (group_size - 1) / group_size
    return 1.0


def expected_calls(spec: JobSpec, source: SourceRank) -> pl.DataFrame:
    """One row per (written rank, collective k) that the job holds: rank, k, seq, name, dtype,
    msg_bytes, start_us (source clock), dur_us, wait_us. Planted p2p ops are not included."""
    delays = planted_delays_ns(spec, source)
    grid = (pl.DataFrame({"rank": list(spec.written_ranks())}, schema={"rank": pl.Int64})
            .join(source.collectives, how="cross"))
    missing = pl.DataFrame({"rank": [r for r, _ in spec.missing], "k": [k for _, k in spec.missing]},
                           schema={"rank": pl.Int64, "k": pl.Int64})
    grid = grid.join(missing, on=["rank", "k"], how="anti").sort("rank", "k")
    delay_ns = delays[grid["rank"].to_numpy(), grid["k"].to_numpy()]
    alltoallv = pl.col("k").is_in(list(spec.alltoallv))
    sent = split_matrix(spec).sum(axis=1)
    calls = grid.with_columns(
        pl.Series("delay_ns", delay_ns),
        pl.when(alltoallv).then(pl.lit("alltoallv")).otherwise("name").alias("name"),
        pl.when(pl.col("k").is_in(list(spec.fp8))).then(pl.lit(FP8_DTYPE))
        .when(alltoallv).then(pl.lit("Float")).otherwise("dtype").alias("dtype"),
        pl.when(alltoallv).then(pl.Series("sent", sent[grid["rank"].to_numpy()]))
        .otherwise("in_nelems").alias("in_nelems"),
    )
    calls = calls.with_columns(
        (pl.col("k") + 1).alias("seq"),
        (pl.col("in_nelems") * pl.col("dtype").replace_strict(DTYPE_BYTES, return_dtype=pl.Int64)).alias("msg_bytes"),
        (pl.col("start_ns") + pl.col("delay_ns")).alias("start_ns"),
    )
    calls = calls.with_columns(  # from integer ns, so the answers carry no float rounding of 4e12 µs clocks
        (pl.col("start_ns") / 1000).alias("start_us"),
        ((pl.col("end_ns") - pl.col("start_ns")) / 1000).alias("dur_us"),
        (pl.col("end_ns") / 1000).alias("end_us"),
        ((pl.col("start_ns").max().over("k") - pl.col("start_ns")) / 1000).alias("wait_us"),
    )
    return calls.select("rank", "k", "seq", "name", "dtype", "msg_bytes", "start_us", "end_us", "dur_us", "wait_us")


def expected_instances(spec: JobSpec, calls: pl.DataFrame) -> pl.DataFrame:
    """One row per collective k: ranks_present, comm_latency_us, start_skew_us, end_skew_us,
    avg_wait_us, earliest/last arrival rank (the planted ladder has no ties), msg_bytes (the largest rank's for all_to_allv), bandwidths."""
    by_wait = calls.sort("k", "wait_us", "rank", descending=[False, True, True])
    earliest = by_wait.group_by("k", maintain_order=True).first().select("k", pl.col("rank").alias("earliest_arrival_rank"))
    last = (calls.sort("k", "wait_us", "rank").group_by("k", maintain_order=True).first()
            .select("k", pl.col("rank").alias("last_arrival_rank")))
    instances = calls.group_by("k").agg(
        pl.col("seq").first(), pl.col("name").first(), pl.col("dtype").first(), pl.col("msg_bytes").first(),
        pl.len().alias("ranks_present"),
        pl.col("dur_us").min().alias("comm_latency_us"),
        pl.col("wait_us").max().alias("start_skew_us"),
        (pl.col("end_us").max() - pl.col("end_us").min()).alias("end_skew_us"),
        pl.col("wait_us").mean().alias("avg_wait_us"),
    ).join(earliest, on="k").join(last, on="k").sort("k")
    factor = np.array([bus_factor(name, spec.world_size) for name in instances["name"]])
    algo = instances["msg_bytes"].to_numpy() / instances["comm_latency_us"].to_numpy() / 1000
    algo_gib = instances["msg_bytes"].to_numpy() / 1024**3 / (instances["comm_latency_us"].to_numpy() / 1e6)
    return instances.with_columns(
        pl.Series("algo_gb_per_s", algo), pl.Series("bus_gb_per_s", algo * factor),
        pl.Series("algo_gib_per_s", algo_gib), pl.Series("bus_gib_per_s", algo_gib * factor))


def expected_straggler_summary(spec: JobSpec, calls: pl.DataFrame) -> pl.DataFrame:
    """TraceLens' straggler summary over the implicit-sync collectives: one row per rank."""
    sync = calls.filter(pl.col("name").is_in(IMPLICIT_SYNC))
    instances = expected_instances(spec, sync)
    last = instances.group_by("last_arrival_rank").len().rename({"last_arrival_rank": "rank", "len": "times_arrived_last"})
    first = instances.group_by("earliest_arrival_rank").len().rename(
        {"earliest_arrival_rank": "rank", "len": "times_arrived_first"})
    summary = sync.group_by("rank").agg(
        pl.col("wait_us").sum().alias("total_wait_us"), pl.col("wait_us").mean().alias("mean_wait_us"),
        pl.len().alias("num_collectives"))
    # TraceLens' total_nccl_dur_us sums every collective kernel of the rank, implicit-sync or not
    summary = summary.join(calls.group_by("rank").agg(pl.col("dur_us").sum().alias("total_comm_us")), on="rank")
    summary = (summary.join(last, on="rank", how="left").join(first, on="rank", how="left")
               .with_columns(pl.col("times_arrived_last", "times_arrived_first").fill_null(0).cast(pl.Int64)))
    return summary.with_columns(
        (100.0 * pl.col("times_arrived_last") / instances.height).alias("pct_arrived_last")).sort("rank")


def alltoallv_answer(spec: JobSpec, source: SourceRank, k: int) -> dict[str, Any]:
    """The planted all_to_allv at collective k: bytes sent per rank (Float), max/mean imbalance, the
    hot pair, and TraceLens' wall time (latest end - earliest start) and throughput over it."""
    matrix = split_matrix(spec) * DTYPE_BYTES["Float"]
    sent = matrix.sum(axis=1)
    hot = np.unravel_index(int(matrix.argmax()), matrix.shape)
    starts_ns = source.collectives["start_ns"][k] + planted_delays_ns(spec, source)[:, k]
    wall_us = (int(source.collectives["end_ns"][k]) - int(starts_ns.min())) / 1000
    total = int(sent.sum())
    return {"size_imbalance": float(sent.max() / sent.mean()), "hot_pair": (int(hot[0]), int(hot[1])),
            "hot_pair_bytes": int(matrix.max()), "total_in_bytes": total, "wall_us": wall_us,
            "start_skew_us": int(starts_ns.max() - starts_ns.min()) / 1000,
            "throughput_gb_per_s": total / wall_us / 1000,
            "throughput_gib_per_s": total / 1024**3 / (wall_us / 1e6)}
