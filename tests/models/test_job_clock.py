"""Job clocks and desync with answers known by construction, from the real 8-rank DLRM job: ranks
4-7 moved to a second node whose clock runs 350 µs ahead (the offset is found, applied and the
collectives come out as on the unshifted job), the ranks' clocks rewritten as `ts` relative to
`baseTimeNanoseconds` bases 7.9e12 µs apart (a 3-month boundary: the job's numbers do not move),
rank 3 missing its last collective (a desync instance, left out of the straggler summary), and
two sampled ranks of a 128-rank job (analyzed for what they have)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

DLRM = Path("/work/shared/traces/jobs/dlrm_8rank")
TWO_OF_128 = Path("/work/shared/traces/hta/trace_filter")  # HTA's two sampled ranks of a 128-rank job
NODE_OFFSET_US = 350
THREE_MONTHS_US = 7_884_000_000_000  # Kineto's _trimonths: 91.25 days
BASE_US = 1_694_127_601_000_000

pytestmark = pytest.mark.skipif(not DLRM.is_dir(), reason="the shared job traces are not on this machine")


def _rank_files() -> list[Path]:
    return sorted(DLRM.glob("worker*.pt.trace.json.gz"))


def _write(trace: dict[str, Any], path: Path) -> Path:
    # a trace is its content hash: each variant names itself, so no two variants share a trace
    # (and so a job tag) where their events are the same (rank 0 of the shifted and desync jobs)
    trace["traceName"] = f"{path.parent.name}/{path.name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        json.dump(trace, handle)
    return path


def _read(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        trace: dict[str, Any] = json.load(handle)
    return trace


def _shifted(trace: dict[str, Any], shift_us: int) -> dict[str, Any]:
    for event in trace["traceEvents"]:
        if "ts" in event:
            event["ts"] += shift_us
    return trace


def _variants(root: Path) -> dict[str, list[Path]]:
    """job name -> its rank files."""
    variants: dict[str, list[Path]] = {"dlrm": _rank_files(), "shifted": [], "straddle": [], "desync": [],
                                       "unaligned": []}
    for path in _rank_files():
        trace, rank = _read(path), int(path.name[len("worker")])
        variants["shifted"].append(_write(_shifted(_read(path), NODE_OFFSET_US if rank >= 4 else 0),
                                          root / "shifted" / path.name))
        base_us = BASE_US - (THREE_MONTHS_US if rank >= 4 else 0)
        straddled = _shifted(_read(path), -base_us)
        straddled["baseTimeNanoseconds"] = base_us * 1000
        variants["straddle"].append(_write(straddled, root / "straddle" / path.name))
        if rank == 3:
            kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel")]
            last = max(kernels, key=lambda e: e["ts"])
            trace["traceEvents"] = [e for e in trace["traceEvents"] if e is not last]
        variants["desync"].append(_write(trace, root / "desync" / path.name))
        # node 1's collectives say broadcast: no implicit-sync collective is common to both nodes
        unaligned = _read(path)
        for event in unaligned["traceEvents"]:
            if rank >= 4 and event.get("name", "").startswith("nccl:"):
                event["name"] = "nccl:broadcast"
        variants["unaligned"].append(_write(unaligned, root / "unaligned" / path.name))
    return variants


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    root = tmp_path_factory.mktemp("job_variants")
    wh = Warehouse(root / "warehouse")
    for job, files in _variants(root / "traces").items():
        if job in ("shifted", "unaligned"):  # two nodes of four ranks, named by a tag as `tracelake analyze` would
            for node, node_files in enumerate((files[:4], files[4:])):
                assert not ingest_paths(node_files, wh, tags={"job": job, "job_node": str(node)}, jobs=2).failed
        else:
            assert not ingest_paths(files, wh, tags={"job": job}, jobs=2).failed
    assert not ingest_paths([TWO_OF_128], wh, tags={"job": "two_of_128"}, jobs=2).failed
    connection = duckdb.connect(str(wh.db_path), read_only=True)
    yield connection
    connection.close()


INSTANCE_METRICS = """
    select index_in_group, comm_latency_us, start_skew_us, end_skew_us, avg_wait_us, earliest_arrival_rank,
        last_arrival_rank, msg_bytes, is_desync
    from collective_instances where job_id = $job order by index_in_group
"""


def _instances(db: duckdb.DuckDBPyConnection, job: str) -> list[tuple[Any, ...]]:
    return db.execute(INSTANCE_METRICS, {"job": job}).fetchall()


def test_a_node_clock_offset_is_found_applied_and_removed(db: duckdb.DuckDBPyConnection) -> None:
    offsets = db.execute("""select node_id, is_reference, offset_us, applied, collectives_used, residual_us
                        from job_clock_offsets where job_id = 'shifted' order by node_id""").fetchall()
    (node0, node1) = offsets
    assert node0[:5] == (0, True, 0.0, False, 8)
    # the planted 350 us plus the unshifted job's own end spread between the two halves (<= 7 us)
    assert node1[:2] == (1, False) and node1[3:5] == (True, 8)
    assert abs(node1[2] - NODE_OFFSET_US) <= 2
    job = db.execute("select node_count, clock_method, clock_uncertainty_us from jobs where job_id = 'shifted'").fetchone()
    assert job is not None and job[:2] == (2, "aligned") and job[2] <= 2
    # after the offset, every collective has the unshifted job's latency, arrivals and skews within
    # the estimate's error; the rank order of arrivals is the same
    residual_error = abs(node1[2] - NODE_OFFSET_US)
    for shifted, original in zip(_instances(db, "shifted"), _instances(db, "dlrm"), strict=True):
        assert shifted[:2] == original[:2] and shifted[7:] == original[7:]
        assert abs(shifted[2] - original[2]) <= residual_error
        assert abs(shifted[3] - original[3]) <= 2 * residual_error
    spans = db.execute("select distinct node_span from collective_instances where job_id = 'shifted'").fetchall()
    assert spans == [("inter_node",)]


def test_ranks_on_both_sides_of_a_three_month_base_match_exactly(db: duckdb.DuckDBPyConnection) -> None:
    ranks = db.execute("""select rank, base_time_us, has_base_time from job_ranks
                      where job_id = 'straddle' and rank in (0, 7) order by rank""").fetchall()
    assert ranks == [(0, BASE_US, True), (7, BASE_US - THREE_MONTHS_US, True)]
    job = db.execute("select epoch_us, clock_method from jobs where job_id = 'straddle'").fetchone()
    assert job == (BASE_US - THREE_MONTHS_US, "base_time")
    assert _instances(db, "straddle") == _instances(db, "dlrm")
    summary = "select * exclude (job_id) from job_straggler_summary where job_id = $job order by rank"
    assert db.execute(summary, {"job": "straddle"}).fetchall() == db.execute(summary, {"job": "dlrm"}).fetchall()


def test_a_rank_missing_a_collective_is_a_desync_not_an_error(db: duckdb.DuckDBPyConnection) -> None:
    desync = db.execute("""select index_in_group, ranks_expected, ranks_present, desync_reason
                       from collective_instances where job_id = 'desync' and is_desync""").fetchall()
    assert desync == [(7, 8, 7, "missing ranks 3")]
    counts = db.execute("""select distinct num_collectives from job_straggler_summary
                       where job_id = 'desync'""").fetchall()
    assert counts == [(7,)]
    # the seven whole collectives keep the job's numbers
    assert _instances(db, "desync")[:7] == _instances(db, "dlrm")[:7]


def test_nodes_without_a_common_implicit_sync_collective_are_unaligned(db: duckdb.DuckDBPyConnection) -> None:
    job = db.execute("select node_count, clock_method, clock_uncertainty_us from jobs where job_id = 'unaligned'").fetchone()
    assert job == (2, "unaligned", None)
    offsets = db.execute("""select node_id, offset_us, applied, collectives_used from job_clock_offsets
                            where job_id = 'unaligned' order by node_id""").fetchall()
    assert offsets == [(0, 0.0, False, 8), (1, None, False, 0)]
    # cross-node skews are not reported; the instances say why they are not in sync
    rows = db.execute("""select count(*), count(start_skew_us), count(end_skew_us), count(avg_wait_us),
                             bool_and(is_desync), any_value(desync_reason)
                         from collective_instances where job_id = 'unaligned'""").fetchone()
    assert rows == (8, 0, 0, 0, True, "ranks disagree on the collective")
    waits = db.execute("select count(wait_us) from collective_calls where job_id = 'unaligned'").fetchone()
    assert waits == (0,)


def test_a_job_of_2_of_128_ranks_is_analyzed_for_what_it_has(db: duckdb.DuckDBPyConnection) -> None:
    job = db.execute("""select world_size, rank_count, len(missing_ranks), missing_ranks[1], missing_ranks[-1]
                        from jobs where job_id = 'two_of_128'""").fetchone()
    assert job == (128, 2, 126, 2, 127)
    # the other 126 ranks' nodes are unknown, so no instance claims to stay on one node; ranks whose
    # profiled windows hold different collectives at one stream position are desync, not an error
    spans = db.execute("""select distinct node_span from collective_instances where job_id = 'two_of_128'""").fetchall()
    assert spans == [("unknown",)]
    counts = db.execute("""select count(*), count(*) filter (where is_desync) from collective_instances
                           where job_id = 'two_of_128'""").fetchone()
    assert counts is not None and counts[0] > counts[1] > 0
