"""The job findings on synthetic jobs whose answers are planted (tests/jobs/synthetic_jobs.py): the
straggler planted last in 3 of every 4 collectives is named, and what the others lose waiting for it
is the planted delays' sum; a rank missing a collective is a desync finding; an all_to_allv with a
planted hot pair is an imbalance finding naming that pair."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from tests.jobs.synthetic.conftest import STRAGGLER, BuiltJob
from tests.jobs.synthetic_jobs import planted_delays_ns
from tracelake.analyzers.contracts import Finding
from tracelake.analyzers.job_common import rows
from tracelake.job_steps import run_job_agents, write_job_report
from tracelake.lakehouse import open_warehouse


def _findings(job: BuiltJob) -> Iterator[tuple[duckdb.DuckDBPyConnection, list[Finding]]]:
    db = open_warehouse(job.warehouse).connect_read_only(repair=False)
    try:
        yield db, run_job_agents(db, job.spec.name)
    finally:
        db.close()


def _one(findings: list[Finding], prefix: str) -> Finding:
    found = [f for f in findings if f.finding_id.startswith(prefix)]
    assert len(found) == 1, [f.finding_id for f in findings]
    return found[0]


def test_the_planted_straggler_and_what_the_others_lose(job_warehouse: Callable[[str], BuiltJob]) -> None:
    job = job_warehouse("delays")
    for db, findings in _findings(job):
        straggler = _one(findings, "job_straggler:rank-")
        assert straggler.finding_id == f"job_straggler:rank-{STRAGGLER}"
        # the collectives it arrives last at, by their position k in the source rank's order
        late = [int(r["k"]) for r in rows(db, (
            "select distinct c.seq - 1 as k from collective_calls as c inner join collective_instances as i "
            "on i.job_id = c.job_id and i.instance_id = c.instance_id "
            f"where i.job_id = '{job.spec.name}' and i.last_arrival_rank = {STRAGGLER} "
            "and i.collective_kind = 'implicit_sync' and not i.is_desync order by k"))]  # Seq = k + 1
        assert late and all(k % 4 != 3 for k in late)  # planted: last in every collective but each 4th
        delays = planted_delays_ns(job.spec, job.source) / 1000.0  # us
        others = [r for r in range(job.spec.world_size) if r != STRAGGLER]
        expected_us = float(sum(np.mean(delays[STRAGGLER, k] - delays[others, k]) for k in late))
        assert straggler.evidence["others_wait_ms"] == pytest.approx(expected_us / 1000.0, abs=1e-5)
        # alone on time, the straggler would make each collective start when the next-latest rank arrives
        lead_us = float(sum(np.min(delays[STRAGGLER, k] - delays[others, k]) for k in late))
        assert straggler.evidence["lead_ms"] == pytest.approx(lead_us / 1000.0, abs=1e-5)
        cap_ms = straggler.evidence["others_exposed_ms"]
        assert straggler.recoverable_ms == pytest.approx(min(lead_us / 1000.0, cap_ms), abs=1e-4)
        (row,) = rows(db, straggler.evidence_sql)
        assert straggler.recoverable_ms == pytest.approx(row["recoverable_us"] / 1000.0, abs=1e-4)


def test_a_rank_missing_a_collective_is_a_desync_finding(job_warehouse: Callable[[str], BuiltJob]) -> None:
    job = job_warehouse("desync")  # rank 3 lost its kernel of collective 6
    for db, findings in _findings(job):
        desync = _one(findings, "job_health:desync")
        assert desync.evidence["count"] == 1
        assert (desync.evidence["ranks_present"], desync.evidence["ranks_expected"]) == (7, 8)
        assert desync.impact_score is None  # a hang risk, not a time
        assert rows(db, desync.evidence_sql)[0]["ranks_present"] == 7


def test_an_all_to_all_with_a_planted_hot_pair(job_warehouse: Callable[[str], BuiltJob]) -> None:
    job = job_warehouse("payloads")  # collective 5 is an all_to_allv whose (2, 5) pair is the largest
    for db, findings in _findings(job):
        imbalance = _one(findings, "job_collectives:alltoall-imbalance")
        assert (imbalance.evidence["hot_src"], imbalance.evidence["hot_dst"]) == job.spec.hot_pair
        (row,) = rows(db, imbalance.evidence_sql)
        assert imbalance.recoverable_ms == pytest.approx(row["recoverable_us"] / 1000.0, abs=1e-4)
        assert "rank 2 to rank 5" in imbalance.insight


def test_a_job_of_2_of_128_ranks_says_which_are_missing(job_warehouse: Callable[[str], BuiltJob],
                                                         tmp_path: Path) -> None:
    job = job_warehouse("sparse128")  # ranks 0 and 77 of 128 written
    for db, findings in _findings(job):
        write_job_report(db, job.spec.name, findings, {}, tmp_path)
        markdown = (tmp_path / "analysis.md").read_text()
        assert "| Ranks present | 2 of 128 (missing: 1-76, 78-127; the job is analyzed for the ranks it has) |" in markdown
        assert "rank 0 of job sparse128 has no report to link" in markdown
