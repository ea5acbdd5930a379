"""Synthetic jobs, each built once per session into its own folder and warehouse (the `job_warehouse`
fixture; test modules import it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import tracelake
from tests.conftest import run_cli
from tests.jobs.synthetic_jobs import JobSpec, SourceRank, load_source, write_job

STRAGGLER = 5  # the rank planted last in 3 of every 4 collectives

JOBS: dict[str, JobSpec] = {
    # planted per-rank delays, one straggler
    "delays": JobSpec(name="delays", straggler=STRAGGLER),
    # the same delays, ranks 4-7 on a second node whose clock runs 350 µs ahead
    "two_nodes": JobSpec(name="two_nodes", straggler=STRAGGLER, gpus_per_node=4, node_offset_us=350),
    # the same delays, odd ranks' baseTimeNanoseconds one 3-month interval earlier
    "trimonth": JobSpec(name="trimonth", straggler=STRAGGLER, trimonth_ranks=(1, 3, 5, 7)),
    # ranks 0 and 1 exchange a send/recv before collective 3 in the default group: order matching
    # within the group would pair their k-th collective with the others' (k-1)-th from there on
    "p2p_comms_id": JobSpec(name="p2p_comms_id", straggler=STRAGGLER, p2p=((0, 1, 3),)),
    "p2p_seq": JobSpec(name="p2p_seq", straggler=STRAGGLER, p2p=((0, 1, 3),), comms_id=False),
    # FP8 all-reduces (k = 2, 9) and an all_to_allv with planted split sizes (k = 5)
    "payloads": JobSpec(name="payloads", straggler=STRAGGLER, fp8=(2, 9), alltoallv=(5,)),
    # rank 3 lost its kernel and host op of collective 6
    "desync": JobSpec(name="desync", straggler=STRAGGLER, missing=((3, 6),)),
    # one 64-rank group: truncated rank lists, and an all_to_allv whose split sizes are truncated
    "wide64": JobSpec(name="wide64", world_size=64, straggler=STRAGGLER, alltoallv=(5,)),
    # 2 ranks of a 128-rank job
    "sparse128": JobSpec(name="sparse128", world_size=128, ranks=(0, 77)),
}


@dataclass(frozen=True)
class BuiltJob:
    spec: JobSpec
    source: SourceRank
    folder: Path
    warehouse: Path

    def query(self, sql: str) -> list[dict[str, object]]:
        """Rows of a query over the job's warehouse, as dicts."""
        with tracelake.open(self.warehouse) as handle:
            return handle.sql(sql).pl().to_dicts()


def ingest_job(spec: JobSpec, folder: Path, warehouse: Path) -> None:
    """`tracelake ingest FOLDER --job NAME [--gpus-per-node N]`: the job assembly of docs/jobs.md."""
    nodes = ["--gpus-per-node", str(spec.gpus_per_node)] if spec.gpus_per_node else []
    result = run_cli("ingest", str(folder), "--warehouse", str(warehouse), "--job", spec.name, *nodes, "--quiet")
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="session")
def job_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], BuiltJob]:
    """name -> the job of JOBS[name], written and ingested on first use."""
    built: dict[str, BuiltJob] = {}

    def build(name: str) -> BuiltJob:
        if name not in built:
            spec = JOBS[name]
            root = tmp_path_factory.mktemp(f"job_{name}")
            write_job(spec, root / name)
            ingest_job(spec, root / name, root / "warehouse")
            built[name] = BuiltJob(spec, load_source(), root / name, root / "warehouse")
        return built[name]

    return build
