"""Commit time of one small trace into a lakehouse warehouse: the local SQLite catalog against a
PostgreSQL catalog (a real server started here on 127.0.0.1, as tests/lake/pg_server.py does).

Each repetition makes a new warehouse holding one trace (FIRST), then ingests SMALL into it and
times the whole `ingest_paths` and, inside it, the commit: the one DuckLake transaction that inserts
the trace's raw rows, runs the incremental plan and commits (LakeWarehouse._commit_traces).

    .venv/bin/python bench/lake_catalog_commit.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DO_NOT_TRACK", "1")

from tests.lake.pg_server import running_server  # noqa: E402
from tracelake.ingest.staged import StagedTrace  # noqa: E402
from tracelake.ingestion import ingest_paths  # noqa: E402
from tracelake.lakehouse import LakeWarehouse  # noqa: E402
from tracelake.shipped_plan import ShippedPlans  # noqa: E402

TRACES = Path(__file__).resolve().parents[1] / "tests" / "data" / "traces"
FIRST = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
SMALL = TRACES / "torch_compile_triton" / "trace.json.gz"


class TimedLake(LakeWarehouse):
    commit_seconds: list[float]

    def _commit_traces(self, plans: ShippedPlans, queued: list[StagedTrace]) -> str:
        started = time.perf_counter()
        try:
            return super()._commit_traces(plans, queued)
        finally:
            self.commit_seconds.append(time.perf_counter() - started)


def one_commit(folder: Path, catalog: str) -> tuple[float, float]:
    """(commit seconds, ingest seconds) of SMALL into a new warehouse of FIRST."""
    lake = TimedLake(folder, catalog)
    lake.commit_seconds = []
    ingest_paths([FIRST], lake, {}, 1)
    started = time.perf_counter()
    ingest_paths([SMALL], lake, {}, 1)
    return lake.commit_seconds[-1], time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {"local": [], "postgresql": []}
    with running_server() as server, tempfile.TemporaryDirectory(prefix="tracelake-bench-") as scratch:
        for trial in range(args.repeat):
            for name in results:
                catalog = "local" if name == "local" else server.url(server.create_database(f"bench_{trial}")
                                                                     .rsplit("/", 1)[1], with_password=True)
                results[name].append(one_commit(Path(scratch) / f"{name}{trial}", catalog))
    print(f"one small trace ({SMALL.relative_to(TRACES)}) into a warehouse of one trace, median of {args.repeat}:")
    for name, runs in results.items():
        commits, ingests = [r[0] for r in runs], [r[1] for r in runs]
        print(f"  {name:<11} commit {statistics.median(commits):6.2f} s   whole ingest {statistics.median(ingests):6.2f} s"
              f"   (commits: {', '.join(f'{c:.2f}' for c in commits)})")


if __name__ == "__main__":
    main()
