"""`tracelake analyze JOB_DIR` end to end on real ranks: each rank's report in ranks/rank<r>/,
linking back to the job's report; a job with missing ranks is analyzed for what it has and says so;
the Python API analyzes a job too; the 8-rank job's straggler summary is TraceLens'."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import tracelake
from tests.conftest import run_cli
from tests.jobs.conftest import DLRM_JOB, DLRM_RANKS, copy_rank


def test_two_of_eight_ranks_are_analyzed_and_the_missing_ones_stated(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "runs" / "dlrm_8rank"
    copy_rank(0, job)
    copy_rank(5, job)
    result = run_cli("analyze", str(job), "--job", "dlrm_pair", "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    out = tmp_path / "runs" / "dlrm_pair_job_analysis"  # default: beside the job's folder, named for the job
    lines = result.stdout.splitlines()
    assert lines[0] == "job dlrm_pair: 2 of 8 ranks on 1 node (deviceProperties); missing ranks: 1-4, 6-7"
    assert [line.split()[:2] for line in lines[1:3]] == [["rank", "0"], ["rank", "5"]]
    assert "warning: the job has 2 of its 8 ranks (missing: 1-4, 6-7); it is analyzed for the ranks present" \
        in result.stderr.splitlines()
    run = json.loads((out / "metadata" / "run.json").read_text())
    assert (run["job"], run["world_size"], run["ranks"], run["missing_ranks"]) == ("dlrm_pair", 8, [0, 5],
                                                                                 [1, 2, 3, 4, 6, 7])
    assert run["rank_reports"] == ["ranks/rank0", "ranks/rank5"]
    for rank in (0, 5):
        report = (out / "ranks" / f"rank{rank}" / "analysis.md").read_text()
        header = report.splitlines()[2]
        assert header == (f"> Rank {rank} of 8 of job `dlrm_pair`. The ranks together (collectives, waits, "
                          "stragglers): [the job's report](../../analysis.md). A rank that waits at its collectives "
                          "for a later rank gains nothing for the job from finishing its own work sooner: the savings "
                          "below shorten the job's step only on the rank the others wait for.")
        rank_run = json.loads((out / "ranks" / f"rank{rank}" / "metadata" / "run.json").read_text())
        assert rank_run["out_dir"] == str(out / "ranks" / f"rank{rank}")  # where it lives, not where it was built
    # the warehouse records each rank's report where it lives
    recorded = run_cli("sql", "select a.analysis_md, t.tags['job_rank'] as rank from analyses a join traces t "
                       "using (trace_id) order by rank", "--format", "json", "--warehouse", str(warehouse_copy))
    assert [(r["rank"], r["analysis_md"]) for r in json.loads(recorded.stdout)] == [
        (str(rank), str(out / "ranks" / f"rank{rank}" / "analysis.md")) for rank in (0, 5)]


def test_the_python_api_analyzes_a_job(warehouse_copy: Path, tmp_path: Path) -> None:
    rank_file = copy_rank(3, tmp_path / "files")
    with tracelake.open(warehouse_copy) as wh:
        result = wh.analyze([rank_file], out=tmp_path / "out", job="one_rank", gpus_per_node=2)
        assert isinstance(result, tracelake.JobAnalysis)
        assert (result.job, result.world_size, result.ranks, result.node_count) == ("one_rank", 8, [3], 1)
        assert result.missing_ranks == [0, 1, 2, 4, 5, 6, 7]
        assert result.rank_reports == {3: tmp_path / "out" / "ranks" / "rank3" / "analysis.md"}
        assert result.rank_reports[3].read_text().startswith("# ")
        ranks = wh.sql("select tags['job_rank'], tags['job_node'], tags['job_node_source'] from traces "
                       "where tags['job'] = 'one_rank'").fetchall()
        assert ranks == [("3", "1", "gpus_per_node")]  # rank 3 // 2 GPUs per node
    assert DLRM_RANKS[3].read_bytes() == rank_file.read_bytes()


def test_the_eight_rank_job_writes_tracelens_straggler_summary(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "dlrm_8rank"
    for rank in DLRM_RANKS:
        copy_rank(rank, job)
    result = run_cli("analyze", str(job), "--warehouse", str(warehouse_copy), "--jobs", "2")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "dlrm_8rank_job_analysis"  # named after the folder
    assert result.stdout.splitlines()[0] == "job dlrm_8rank: 8 of 8 ranks on 1 node (deviceProperties)"
    assert f"wrote {out / 'analysis.md'}" in result.stdout.splitlines()  # the job's report, its P1 next
    expected = list(csv.DictReader((DLRM_JOB / "expected" / "tracelens" / "straggler_summary.csv").open()))
    written = list(csv.DictReader((out / "collective_report" / "straggler_summary.csv").open()))
    assert written == expected  # rank 7 last in 5 of 8 collectives, waits 1,534 us; rank 1 waits 11,125 us
    run = json.loads((out / "metadata" / "run.json").read_text())
    assert (run["ranks"], run["missing_ranks"], run["node_count"]) == (list(range(8)), [], 1)
    assert run["rank_reports"] == [f"ranks/rank{rank}" for rank in range(8)]
    # the job report shows each rank's own P1 (its recorded findings), the straggler marked
    report = (out / "analysis.md").read_text()
    leads = report.split("## What each rank's own report leads with", 1)[1].split("\n## ", 1)[0]
    for rank in range(8):
        rank_p1 = json.loads((out / "ranks" / f"rank{rank}" / "priority_data.json").read_text())["findings"][0]
        marker = " **straggler**" if rank == 7 else ""
        assert f"| {rank}{marker} | {rank_p1['title']} |" in leads
