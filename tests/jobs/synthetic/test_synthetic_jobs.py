"""The synthetic job builder: its files are real traces TraceLake ingests, and they hold what was planted."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.jobs.planted_answers import expected_calls
from tests.jobs.synthetic.conftest import STRAGGLER, BuiltJob
from tests.jobs.synthetic_jobs import (
    SENDRECV_KERNEL,
    TRIMONTH_NS,
    JobSpec,
    list_text,
    load_source,
    planted_delays_ns,
    rank_trace,
)

TOLERANCE_US = 0.005  # Kineto's ns resolution, on a float64 clock of ~4.5e12 µs


def _rank(spec: JobSpec, rank: int) -> dict[str, Any]:
    source = load_source()
    return json.loads(rank_trace(spec, source, rank, planted_delays_ns(spec, source)), parse_float=Decimal)  # exact µs


def _comm_kernels(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")),
                  key=lambda e: e["ts"])


def test_the_ranks_ingest_with_the_planted_kernel_times(job_warehouse: Callable[[str], BuiltJob]) -> None:
    job = job_warehouse("delays")
    rows = job.query("""
        select t.rank, t.world_size, k.ts_us, k.dur_us,
               row_number() over (partition by k.trace_id order by k.ts_us) - 1 as k
        from kernels k join traces t using (trace_id)
        where k.name like 'nccl%' order by t.rank, k.ts_us""")
    expected = expected_calls(job.spec, job.source).select("rank", "k", "start_us", "dur_us").to_dicts()
    assert len(rows) == len(expected) == 8 * 21
    for row, want in zip(rows, expected):
        assert (row["rank"], row["k"], row["world_size"]) == (want["rank"], want["k"], 8)
        assert row["ts_us"] == pytest.approx(want["start_us"], abs=TOLERANCE_US)
        assert row["dur_us"] == pytest.approx(want["dur_us"], abs=TOLERANCE_US)
    problems = job.query("select check_name, count(*) as n from trace_quality where verdict <> 'pass' group by 1")
    assert problems == []


def test_ends_stay_starts_move_and_the_straggler_is_last() -> None:
    spec = JobSpec(straggler=STRAGGLER)
    kernels = {rank: _comm_kernels(_rank(spec, rank)) for rank in (0, STRAGGLER)}
    source = load_source()
    for k, (mine, straggler) in enumerate(zip(kernels[0], kernels[STRAGGLER])):
        assert round((mine["ts"] + mine["dur"]) * 1000) == round((straggler["ts"] + straggler["dur"]) * 1000) \
            == source.collectives["end_ns"][k]
        if k % 4 != 3:
            assert straggler["ts"] > mine["ts"]


def test_seq_and_comms_id_with_a_p2p_that_breaks_order_matching() -> None:
    spec = JobSpec(p2p=((0, 1, 3),))
    sender, receiver, other = (_comm_kernels(_rank(spec, rank)) for rank in (0, 1, 2))
    assert [len(sender), len(receiver), len(other)] == [22, 22, 21]
    send, recv = sender[3], receiver[3]
    assert (send["name"], send["args"]["Collective name"], send["args"]["Dst Rank"]) == (SENDRECV_KERNEL, "send", 1)
    assert (recv["args"]["Collective name"], recv["args"]["Src Rank"]) == ("recv", 0)
    assert send["args"]["Seq"] == recv["args"]["Seq"] == 1
    assert send["args"]["Comms Id"] == recv["args"]["Comms Id"]
    collectives = [e for e in sender if e["args"]["Collective name"] != "send"]
    assert [e["args"]["Seq"] for e in collectives] == [e["args"]["Seq"] for e in other] == list(range(1, 22))
    assert [e["args"]["Comms Id"] for e in collectives] == [e["args"]["Comms Id"] for e in other]
    assert len({e["args"]["Comms Id"] for e in other} | {send["args"]["Comms Id"]}) == 22
    # order within the group pairs rank 0's send with rank 2's all-reduce, and every later one off by one
    assert (sender[3]["args"]["Collective name"], other[3]["args"]["Collective name"]) == ("send", "allreduce")
    assert sender[4]["args"]["In msg nelems"] != other[4]["args"]["In msg nelems"]


def test_kineto_truncation_past_30() -> None:
    assert list_text(list(range(64)), ranks=True) == "[" + ", ".join(map(str, range(29))) + ", ..., 63]"
    assert list_text([7] * 64, ranks=False) == "[" + ", ".join(["7"] * 30) + ", ...]"
    assert list_text([0, 1], ranks=True) == "[0, 1]"
    wide = _rank(JobSpec(world_size=64, alltoallv=(5,)), 9)
    assert wide["distributedInfo"]["pg_config"][0]["ranks"] == list_text(list(range(64)), ranks=True)
    alltoallv = _comm_kernels(wide)[5]["args"]
    assert alltoallv["Collective name"] == "all_to_allv" and alltoallv["In split size"].endswith(", ...]")
    assert alltoallv["Process Group Ranks"].endswith(", 28, ..., 63]") and alltoallv["Group size"] == 64


def test_clock_variants_keep_absolute_times() -> None:
    plain = JobSpec(straggler=STRAGGLER, gpus_per_node=4)
    shifted = JobSpec(straggler=STRAGGLER, gpus_per_node=4, node_offset_us=350, trimonth_ranks=(5,))
    for rank, offset_us in ((1, 0), (5, 350)):
        before, after = _rank(plain, rank), _rank(shifted, rank)
        base_before, base_after = before["baseTimeNanoseconds"], after["baseTimeNanoseconds"]
        assert base_before - base_after == (TRIMONTH_NS if rank == 5 else 0)
        assert len(after["deviceProperties"]) == 4
        for old, new in zip(_comm_kernels(before), _comm_kernels(after)):
            absolute_old = base_before * 1000 + int(old["ts"] * 1_000_000)  # in ps, exact
            absolute_new = base_after * 1000 + int(new["ts"] * 1_000_000)
            assert absolute_new - absolute_old == offset_us * 1_000_000


def test_a_missing_collective_and_a_rank_subset() -> None:
    spec = JobSpec(world_size=128, ranks=(0, 77), missing=((77, 6),))
    trace = _rank(spec, 77)
    assert trace["distributedInfo"]["rank"] == 77 and trace["distributedInfo"]["world_size"] == 128
    assert [e["args"]["Seq"] for e in _comm_kernels(trace)] == [s for s in range(1, 22) if s != 7]


def test_the_command_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tests.jobs.synthetic_jobs"]
    done = subprocess.run([*command, str(tmp_path / "job"), "--ranks", "2", "--straggler", "1"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    ranks = [json.loads(gzip.decompress((tmp_path / "job" / f"rank{r}.json.gz").read_bytes()))["distributedInfo"]
             for r in (0, 1)]
    assert [(info["rank"], info["world_size"]) for info in ranks] == [(0, 2), (1, 2)]
    bad = subprocess.run([*command, str(tmp_path / "bad"), "--ranks", "4", "--straggler", "4"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
