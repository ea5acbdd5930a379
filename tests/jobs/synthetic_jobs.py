"""Synthetic multi-rank jobs built from one real rank, with answers known by construction.

The source is a real 2024 Kineto rank (`nccl_data`, rank 0 of 2 on A100s: 21 NCCL collectives with
their `record_param_comms` args copied onto the kernels, `baseTimeNanoseconds`). Each rank r of the
job is that rank with:

- `distributedInfo` {rank r, world_size W, pg_config}, the default group widened to W ranks
  (`Process Group Ranks` truncated past 30 ranks as Kineto writes it: "[0, 1, ..., 28, ..., 63]",
  split sizes cut to 30 entries), `Global rank start/stride`;
- `Seq` (per process group, counted separately for p2p and collectives) and `Comms Id` (a hash of
  group, seq, p2p or not, rank start, stride and size, as PyTorch's) on the host op and the kernel;
- planted delays: the GPU work of window k (from the end of collective k-1 to the start of
  collective k) moves later by delta[r, k] and collective k starts delta[r, k] later while its END
  stays put (work during a collective is compressed in proportion, so every stream keeps its order).
  The expected wait of rank r in collective k is then max_s delta[s, k] - delta[r, k], and the
  last arrival is the rank with the largest delta. CPU events are not moved.

Variants (`JobSpec`): a clock offset added to every time of the ranks on node >= 1, ranks whose
`baseTimeNanoseconds` is one 3-month interval earlier (their `ts` larger by as much, so absolute
times are equal), p2p send/recv inserted before a collective, a rank's kernel of a collective removed,
FP8 dtypes, all_to_allv with planted split sizes, a subset of the ranks written.

Times are handled in integer nanoseconds (Kineto writes µs with 3 decimals); each rank's events are
re-timed and re-serialised as columns (numpy, polars), the collective rows (~21) rebuilt one by one.

    python -m tests.jobs.synthetic_jobs OUT_DIR --ranks 64 [--gpus-per-node 8] [--straggler 5]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

DATA = Path(__file__).parents[1] / "data" / "jobs"
NCCL_DATA = DATA / "single_ranks" / "nccl_data__rank0_of_2__a100_2024.json.gz"
TRIMONTH_NS = 7_889_238_000_000_000  # one 3-month interval (365.2425 / 4 days) of Kineto's base-time floor
KINETO_TRUNCATE = 30  # PyTorch's kTruncatLength: rank lists and split sizes past 30 entries are cut
SENDRECV_KERNEL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
P2P_LEAD_NS = 30_000  # a planted send/recv kernel starts 30 µs before its collective (base clock) ...
P2P_DUR_NS = 10_000  # ... and lasts 10 µs
P2P_NELEMS = 1024
P2P_TID = 999_001  # the host thread of planted p2p ops (their own, so no host op nesting changes)
P2P_ID_BASE = 90_000_000  # External id and correlation of planted p2p ops
FP8_DTYPE = "Float8_e4m3fn"
HOT_PAIR_NELEMS = 65_536  # the planted hot all_to_allv pair's elements; every other pair has <= 6,144


@dataclass(frozen=True)
class JobSpec:
    """What to plant. Collectives are numbered k = 0..K-1 in the source rank's order."""

    name: str = "synthetic"  # written into each rank's traceName: jobs that differ only here are distinct files
    world_size: int = 8
    ranks: tuple[int, ...] | None = None  # the ranks written (None: all)
    gpus_per_node: int | None = None  # deviceProperties length and rank // gpus_per_node nodes
    seed: int = 24
    delay_fraction: float = 0.8  # the largest delta of collective k is this share of its duration
    straggler: int | None = None  # planted last arrival in every collective but each 4th
    node_offset_us: int = 0  # added to every time of node n's ranks, n times
    trimonth_ranks: tuple[int, ...] = ()  # ranks whose baseTimeNanoseconds is one 3-month step earlier
    seq: bool = True
    comms_id: bool = True
    p2p: tuple[tuple[int, int, int], ...] = ()  # (src, dst, k): a send/recv just before collective k
    missing: tuple[tuple[int, int], ...] = ()  # (rank, k): the rank's kernel and host op of k removed
    fp8: tuple[int, ...] = ()  # collectives whose dtype becomes Float8_e4m3fn
    alltoallv: tuple[int, ...] = ()  # collectives that become all_to_allv with `split_matrix` sizes
    hot_pair: tuple[int, int] = (2, 5)  # (src, dst) of the planted largest all_to_allv transfer

    def written_ranks(self) -> tuple[int, ...]:
        return self.ranks if self.ranks is not None else tuple(range(self.world_size))

    def node_of(self, rank: int) -> int:
        return rank // self.gpus_per_node if self.gpus_per_node else 0


@dataclass(frozen=True)
class SourceRank:
    """The real rank: header, one row per event (JSON body without ts/dur, times in ns), collectives."""

    header: dict[str, Any]
    events: pl.DataFrame  # row, body, ts_ns, dur_ns, is_gpu
    collectives: pl.DataFrame  # k, kernel_row, rpc_row, start_ns, end_ns, name, dtype, in/out_nelems
    kernel_events: tuple[dict[str, Any], ...] = field(repr=False)  # the collectives' kernel events, by k
    rpc_events: tuple[dict[str, Any], ...] = field(repr=False)  # their record_param_comms, by k

    @property
    def gpu_pid(self) -> Any:
        return self.kernel_events[0]["pid"]


def _ns(values: list[Any]) -> np.ndarray:
    """Kineto µs (3 decimals) as exact int64 ns; missing values -1."""
    micros = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    whole = np.floor(micros)
    ns = whole * 1000 + np.rint((micros - whole) * 1000)
    return np.where(np.isnan(micros), -1, ns).astype(np.int64)


@lru_cache(maxsize=2)
def load_source(path: Path = NCCL_DATA) -> SourceRank:
    trace = json.loads(gzip.decompress(path.read_bytes()))
    events: list[dict[str, Any]] = trace.pop("traceEvents")
    bodies = [json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")}) for e in events]
    gpu_pids = {e["pid"] for e in events if e.get("cat") == "kernel"}
    frame = pl.DataFrame({
        "row": np.arange(len(events)),
        "body": bodies,
        "ts_ns": _ns([e.get("ts") for e in events]),
        "dur_ns": _ns([e.get("dur") for e in events]),
        "is_gpu": [e.get("pid") in gpu_pids for e in events],
        "cat": [e.get("cat") for e in events],
        "name": [str(e.get("name", "")) for e in events],
        "external_id": [(e.get("args") or {}).get("External id") for e in events],
    })
    kernels = (frame.filter((pl.col("cat") == "kernel") & pl.col("name").str.starts_with("nccl"))
               .sort("ts_ns").with_row_index("k"))
    rpcs = frame.filter(pl.col("name") == "record_param_comms").select(
        pl.col("external_id"), pl.col("row").alias("rpc_row"))
    collectives = kernels.join(rpcs, on="external_id", how="left").sort("k").select(
        pl.col("k").cast(pl.Int64), pl.col("row").alias("kernel_row"), "rpc_row",
        pl.col("ts_ns").alias("start_ns"), (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
    kernel_events = tuple(events[i] for i in collectives["kernel_row"])
    rpc_events = tuple(events[i] for i in collectives["rpc_row"])
    collectives = collectives.with_columns(
        pl.Series("name", [e["args"]["Collective name"] for e in kernel_events]),
        pl.Series("dtype", [e["args"]["dtype"] for e in kernel_events]),
        pl.Series("in_nelems", [e["args"]["In msg nelems"] for e in kernel_events]),
        pl.Series("out_nelems", [e["args"]["Out msg nelems"] for e in kernel_events]),
    )
    starts, ends = collectives["start_ns"].to_numpy(), collectives["end_ns"].to_numpy()
    if (starts[1:] < ends[:-1]).any():
        raise ValueError(f"{path.name}: collectives overlap; the planting needs them one after another")
    return SourceRank(trace, frame.select("row", "body", "ts_ns", "dur_ns", "is_gpu"), collectives,
                      kernel_events, rpc_events)


# ---- what is planted -----------------------------------------------------------------------------


def planted_delays_ns(spec: JobSpec, source: SourceRank) -> np.ndarray:
    """delta[r, k] in ns: distinct per collective (a permuted ladder of steps), the straggler on top."""
    rng = np.random.default_rng(spec.seed)
    durations = (source.collectives["end_ns"] - source.collectives["start_ns"]).to_numpy()
    world, count = spec.world_size, len(durations)
    steps = np.floor(durations * spec.delay_fraction / max(world - 1, 1)).astype(np.int64)
    ladder = np.stack([rng.permutation(world) for _ in range(count)], axis=1)  # (W, K) positions
    if spec.straggler is not None:
        planted = np.arange(count) % 4 != 3
        top = ladder[:, planted].argmax(axis=0)  # whoever holds the top position swaps with the straggler
        columns = np.flatnonzero(planted)
        ladder[top, columns], ladder[spec.straggler, columns] = (ladder[spec.straggler, columns],
                                                                 ladder[top, columns])
    return ladder.astype(np.int64) * steps[None, :]


def split_matrix(spec: JobSpec) -> np.ndarray:
    """Planted all_to_allv split sizes (elements, 1-D tensors): [src, dst]; the hot pair is the largest."""
    world = spec.world_size
    src, dst = np.meshgrid(np.arange(world), np.arange(world), indexing="ij")
    matrix = 4096 + 512 * ((src * 7 + dst * 3) % 5)
    matrix[spec.hot_pair] = HOT_PAIR_NELEMS
    return matrix.astype(np.int64)


def comms_id(pg_name: str, seq: int, is_p2p: bool, world: int) -> int:
    """A 60-bit stand-in for PyTorch's hash(pg_name, seq, isP2P, globalRankStart, stride, worldSize)."""
    text = f"{pg_name}|{seq}|{int(is_p2p)}|0|1|{world}".encode()
    return int(hashlib.blake2b(text, digest_size=8).hexdigest()[:15], 16)


def list_text(values: list[int], ranks: bool) -> str:
    """A rank list or split sizes as Kineto writes them, truncated past 30 entries."""
    if len(values) <= KINETO_TRUNCATE:
        return "[" + ", ".join(map(str, values)) + "]"
    if ranks:  # the first 29, "...", the last
        return "[" + ", ".join(map(str, values[:KINETO_TRUNCATE - 1])) + f", ..., {values[-1]}]"
    return "[" + ", ".join(map(str, values[:KINETO_TRUNCATE])) + ", ...]"


# ---- one rank ------------------------------------------------------------------------------------


def _group_args(spec: JobSpec) -> dict[str, Any]:
    return {"Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": list_text(list(range(spec.world_size)), ranks=True),
            "Group size": spec.world_size, "Global rank start": 0, "Global rank stride": 1}


def _collective_args(spec: JobSpec, rank: int, k: int) -> dict[str, Any]:
    """The args rank `rank` writes on collective k's kernel and host op (besides the source's)."""
    args = _group_args(spec)
    if spec.seq:
        args["Seq"] = k + 1
    if spec.comms_id:
        args["Comms Id"] = comms_id("0", k + 1, False, spec.world_size)
    if k in spec.fp8:
        args["dtype"] = FP8_DTYPE
    if k in spec.alltoallv:
        matrix = split_matrix(spec)
        sent, received = matrix[rank].tolist(), matrix[:, rank].tolist()
        args.update({"Collective name": "all_to_allv", "dtype": "Float",
                     "In msg nelems": sum(sent), "Out msg nelems": sum(received),
                     "In split size": list_text(sent, ranks=False),
                     "Out split size": list_text(received, ranks=False)})
    return args


def _p2p_events(spec: JobSpec, source: SourceRank, rank: int) -> list[dict[str, Any]]:
    """This rank's planted send/recv: host op, launch, flow and kernel, with seq counted per rank."""
    planted: list[dict[str, Any]] = []
    mine = [(src, dst, k) for src, dst, k in spec.p2p if rank in (src, dst)]
    for seq, (src, dst, k) in enumerate(sorted(mine, key=lambda p: p[2]), start=1):
        kernel, rpc = source.kernel_events[k], source.rpc_events[k]
        ident = P2P_ID_BASE + 2 * len(planted)
        args = {**_group_args(spec), "Collective name": "send" if rank == src else "recv", "dtype": "Float",
                "In msg nelems": P2P_NELEMS, "Out msg nelems": P2P_NELEMS,
                "In split size": "[]", "Out split size": "[]", "Src Rank": src, "Dst Rank": dst}
        if spec.seq:
            args["Seq"] = seq
        if spec.comms_id:
            args["Comms Id"] = comms_id("0", seq, True, spec.world_size)
        start_us = int(source.collectives["start_ns"][k] - P2P_LEAD_NS) / 1000
        host_us = round(float(rpc["ts"]) - 50.0, 3)
        kernel_args = {key: kernel["args"][key] for key in ("device", "context", "stream")}
        planted += [
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": rpc["pid"], "tid": P2P_TID,
             "ts": host_us, "dur": 10.0, "args": {"External id": ident, **args}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": rpc["pid"], "tid": P2P_TID,
             "ts": host_us + 5.0, "dur": 3.0, "args": {"External id": ident, "correlation": ident + 1}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": ident + 1, "pid": rpc["pid"], "tid": P2P_TID,
             "ts": host_us + 5.0},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": ident + 1, "pid": kernel["pid"],
             "tid": kernel["tid"], "ts": start_us, "bp": "e"},
            {"ph": "X", "cat": "kernel", "name": SENDRECV_KERNEL, "pid": kernel["pid"], "tid": kernel["tid"],
             "ts": start_us, "dur": P2P_DUR_NS / 1000,
             "args": {"External id": ident, "correlation": ident + 1, **kernel_args, **args}},
        ]
    return planted


def _frame_of(events: list[dict[str, Any]], gpu_pid: Any, first_row: int) -> pl.DataFrame:
    return pl.DataFrame({
        "row": np.arange(first_row, first_row + len(events)),
        "body": [json.dumps({k: v for k, v in e.items() if k not in ("ts", "dur")}) for e in events],
        "ts_ns": _ns([e.get("ts") for e in events]),
        "dur_ns": _ns([e.get("dur") for e in events]),
        "is_gpu": [e["pid"] == gpu_pid for e in events],
    }, schema_overrides={"row": pl.Int64})


def retime(starts: np.ndarray, ends: np.ndarray, collectives: pl.DataFrame,
           delays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map GPU times: window k (end of k-1 .. start of k) + delays[k]; collective k compressed to end
    where it ended. A start on a boundary belongs to what follows it, an end to what precedes it."""
    s = collectives["start_ns"].to_numpy()
    e = collectives["end_ns"].to_numpy()
    edges = np.column_stack([s, e]).ravel()

    def mapped(t: np.ndarray, side: Any) -> np.ndarray:
        position = np.searchsorted(edges, t, side=side)
        k = np.minimum(position // 2, len(s) - 1)
        in_window = position % 2 == 0
        after_last = position == len(edges)
        length = e[k] - s[k]
        compressed = s[k] + delays[k] + (t - s[k]) * (length - delays[k]) // np.maximum(length, 1)
        shifted = np.where(after_last, t, t + delays[k])
        return np.where(in_window, shifted, compressed)

    return mapped(starts, "right"), mapped(ends, "left")


def _header(spec: JobSpec, source: SourceRank, rank: int) -> dict[str, Any]:
    header = json.loads(json.dumps(source.header))
    world = spec.world_size
    ranks: Any = list(range(world)) if world <= KINETO_TRUNCATE else list_text(list(range(world)), ranks=True)
    header["distributedInfo"] = {
        "backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1,
        "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                       "pg_size": world, "ranks": ranks}],
        "nccl_version": source.header["distributedInfo"].get("nccl_version", "2.17.1")}
    if spec.gpus_per_node:
        devices = source.header["deviceProperties"]
        header["deviceProperties"] = [{**devices[i % len(devices)], "id": i} for i in range(spec.gpus_per_node)]
    if rank in spec.trimonth_ranks:
        header["baseTimeNanoseconds"] = int(source.header["baseTimeNanoseconds"]) - TRIMONTH_NS
    header["traceName"] = f"{spec.name}/rank{rank}.json"
    return header


def rank_trace(spec: JobSpec, source: SourceRank, rank: int, delays: np.ndarray) -> bytes:
    """One rank's trace as JSON bytes."""
    collectives = source.collectives
    dropped = {k for r, k in spec.missing if r == rank}
    replaced: dict[int, str] = {}
    for k, (kernel, rpc) in enumerate(zip(source.kernel_events, source.rpc_events, strict=True)):
        extra = _collective_args(spec, rank, k)
        for row, event in ((collectives["kernel_row"][k], kernel), (collectives["rpc_row"][k], rpc)):
            body = {key: value for key, value in event.items() if key not in ("ts", "dur")}
            body["args"] = {**event["args"], **extra}
            if k in spec.alltoallv and event is kernel:
                body["name"] = SENDRECV_KERNEL
            replaced[int(row)] = json.dumps(body)
    drop_rows = [int(collectives[column][k]) for k in dropped for column in ("kernel_row", "rpc_row")]
    events = source.events
    if replaced:
        new_bodies = pl.DataFrame({"row": list(replaced), "new_body": list(replaced.values())},
                                  schema_overrides={"row": pl.Int64})
        events = (events.join(new_bodies, on="row", how="left")
                  .with_columns(pl.coalesce("new_body", "body").alias("body")).drop("new_body"))
    events = events.filter(~pl.col("row").is_in(drop_rows))
    planted = _p2p_events(spec, source, rank)
    if planted:
        events = pl.concat([events, _frame_of(planted, source.gpu_pid, source.events.height)])
    events = events.sort("row")

    ts, dur, gpu = events["ts_ns"].to_numpy(), events["dur_ns"].to_numpy(), events["is_gpu"].to_numpy()
    has_ts, has_dur = ts >= 0, dur >= 0
    end = ts + np.where(has_dur, dur, 0)
    new_ts, new_end = retime(ts, end, collectives, delays[rank])
    ts = np.where(gpu & has_ts, new_ts, ts)
    end = np.where(gpu & has_ts, new_end, end)
    shift = spec.node_of(rank) * spec.node_offset_us * 1000 + (TRIMONTH_NS if rank in spec.trimonth_ranks else 0)
    ts = np.where(has_ts, ts + shift, -1)
    dur = np.where(has_dur, end + shift - ts, -1)
    rows = pl.DataFrame({"body": events["body"], "ts": ts, "dur": dur}).select(
        pl.col("body").str.strip_suffix("}")
        + pl.when(pl.col("ts") >= 0).then(pl.lit(', "ts": ') + _micros("ts")).otherwise(pl.lit(""))
        + pl.when(pl.col("dur") >= 0).then(pl.lit(', "dur": ') + _micros("dur")).otherwise(pl.lit(""))
        + pl.lit("}"))
    header = json.dumps(_header(spec, source, rank))
    return (header[:-1] + ', "traceEvents": [\n' + ",\n".join(rows.to_series().to_list()) + "\n]}").encode()


def _micros(column: str) -> pl.Expr:
    """int ns -> Kineto's µs text with 3 decimals."""
    ns = pl.col(column)
    return (ns // 1000).cast(pl.String) + "." + (ns % 1000).cast(pl.String).str.zfill(3)


def file_name(rank: int) -> str:
    return f"rank{rank}.json.gz"


def write_job(spec: JobSpec, out_dir: Path, source: SourceRank | None = None) -> list[Path]:
    """Write the job's rank files (gzip) into out_dir; returns their paths in rank order."""
    source = source or load_source()
    delays = planted_delays_ns(spec, source)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in spec.written_ranks():
        path = out_dir / file_name(rank)
        path.write_bytes(gzip.compress(rank_trace(spec, source, rank, delays), compresslevel=3, mtime=0))
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.jobs.synthetic_jobs", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--ranks", type=int, default=8, help="world size (every rank is written)")
    parser.add_argument("--gpus-per-node", type=int, default=None)
    parser.add_argument("--straggler", type=int, default=None)
    parser.add_argument("--node-offset-us", type=int, default=0)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    if args.ranks < 2 or (args.straggler is not None and not 0 <= args.straggler < args.ranks):
        print("synthetic_jobs: --ranks must be >= 2 and --straggler a rank below it", file=sys.stderr)
        return 2
    spec = JobSpec(world_size=args.ranks, gpus_per_node=args.gpus_per_node, straggler=args.straggler,
                   node_offset_us=args.node_offset_us, seed=args.seed)
    paths = write_job(spec, args.out_dir)
    print(f"wrote {len(paths)} ranks to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
