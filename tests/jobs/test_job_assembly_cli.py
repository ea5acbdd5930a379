"""Job assembly at the command line (`tracelake ingest --job`, `tracelake ingest DIR`): each rank
from distributedInfo, else the file name, else a clear error; world sizes, duplicate ranks and
files that are not traces refused with one line; nodes from hosts, --gpus-per-node or
deviceProperties. Jobs are copies of the real DLRM ranks, the answers planted by renaming them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import TRACES, run_cli
from tests.jobs.conftest import DLRM_RANKS, copy_rank, write_rank

JobTags = Callable[[], dict[str, dict[str, str]]]


def _one_line_error(result: object, *fragments: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    message = result.stderr.strip()  # type: ignore[attr-defined]
    assert message.count("\n") == 0 and message.startswith("tracelake: error: job "), message
    assert "Traceback" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_the_rank_comes_from_distributed_info_when_the_file_names_say_otherwise(tmp_path: Path) -> None:
    job = tmp_path / "swapped"
    names = {}
    for rank in range(8):  # each file named for the next rank: worker0's content is called worker1, ...
        names[rank] = f"worker{(rank + 1) % 8}_step_12.trace.json.gz"
        copy_rank(rank, job, names[rank])
    warehouse = tmp_path / "fresh_wh"  # a new warehouse: traces.file_name is the renamed file's
    result = run_cli("ingest", str(job), "--job", "swapped", "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    assert "job swapped: 8 of 8 ranks on 1 node (deviceProperties)" in result.stdout
    rows = json.loads(run_cli("sql", "select file_name, tags from traces", "--format", "json",
                              "--warehouse", str(warehouse)).stdout)
    tags = {row["file_name"]: row["tags"] for row in rows}
    for rank, name in names.items():
        assert tags[name]["job_rank"] == str(rank), (name, tags[name])
        assert tags[name]["job_rank_source"] == "distributedInfo"
        assert tags[name]["job_world_size"] == "8" and tags[name]["job_world_size_source"] == "distributedInfo"
    assert "is rank 3 (distributedInfo.rank), not 4 as its name says" in result.stderr


def test_a_file_without_distributed_info_takes_its_rank_from_its_name(warehouse_copy: Path, tmp_path: Path,
                                                                      job_tags: JobTags) -> None:
    job = tmp_path / "dlrm"
    for rank in range(8):
        if rank != 6:
            copy_rank(rank, job)
    write_rank(6, job, "rank-6.trace.json.gz", None)  # TraceLens' pattern; no distributedInfo at all
    result = run_cli("ingest", str(job), "--job", "dlrm", "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    tags = job_tags()
    assert tags["rank-6.trace.json.gz"] == {
        "job": "dlrm", "job_rank": "6", "job_rank_source": "file_name", "job_world_size": "8",
        "job_world_size_source": "distributedInfo", "job_node": "0", "job_node_source": "deviceProperties",
        "job_folder": str(job.resolve())}
    assert tags[DLRM_RANKS[5].name]["job_rank"] == "5"


def test_a_rank_neither_the_header_nor_the_name_gives_is_refused(warehouse_copy: Path, tmp_path: Path,
                                                                 job_tags: JobTags) -> None:
    job = tmp_path / "dlrm"
    copy_rank(0, job)
    write_rank(1, job, "trace_b.json.gz", None)
    result = run_cli("ingest", str(job), "--job", "dlrm", "--warehouse", str(warehouse_copy), "--quiet")
    _one_line_error(result, "trace_b.json.gz: no rank", "distributedInfo.rank", "rank<N> or worker<N>")
    assert all(not tags for tags in job_tags().values())  # nothing tagged


def test_two_files_claiming_one_rank_are_refused(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "dlrm"
    copy_rank(3, job)
    write_rank(2, job, "worker3_again.json.gz", None)  # no header rank; its name says 3
    result = run_cli("analyze", str(job), "--warehouse", str(warehouse_copy), "--out", str(tmp_path / "out"))
    _one_line_error(result, "two files claim rank 3", f"{DLRM_RANKS[3].name} (distributedInfo)",
                    "worker3_again.json.gz (file_name)")
    assert not (tmp_path / "out").exists()


def test_world_sizes_that_disagree_are_refused(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "dlrm"
    for rank in range(7):
        copy_rank(rank, job)
    write_rank(7, job, "worker7_of_16.json.gz", {"backend": "nccl", "rank": 7, "world_size": 16})
    result = run_cli("analyze", str(job), "--warehouse", str(warehouse_copy), "--out", str(tmp_path / "out"))
    _one_line_error(result, "world sizes disagree", "8 in", "16 in worker7_of_16.json.gz")


def test_a_rank_not_below_the_world_size_is_refused(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "dlrm"
    copy_rank(0, job)
    write_rank(1, job, "worker1.json.gz", {"backend": "nccl", "rank": 8, "world_size": 8})
    result = run_cli("ingest", str(job), "--job", "dlrm", "--warehouse", str(warehouse_copy), "--quiet")
    _one_line_error(result, "worker1.json.gz: rank 8 (distributedInfo) is not below the world size 8")


def test_a_json_file_that_is_not_a_trace_is_named(warehouse_copy: Path, tmp_path: Path) -> None:
    job = tmp_path / "dlrm"
    copy_rank(0, job)
    copy_rank(1, job)
    (job / "launcher_config.json").write_text(json.dumps({"nodes": 1, "gpus": 8}))
    result = run_cli("analyze", str(job), "--warehouse", str(warehouse_copy), "--out", str(tmp_path / "out"))
    _one_line_error(result, "launcher_config.json", "traceEvents")


def test_a_folder_of_two_gpus_traces_is_not_one_job(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    (folder / "rank0.json.gz").write_bytes((TRACES / "h100/gaunernst_bert-small-uncased__1016001.json.gz").read_bytes())
    (folder / "rank1.json.gz").write_bytes((TRACES / "mi300/gaunernst_bert-small-uncased__1016001.json.gz").read_bytes())
    result = run_cli("analyze", str(folder), "--warehouse", str(tmp_path / "wh"))
    _one_line_error(result, "come from different GPUs", "rank0.json.gz", "rank1.json.gz", "not the ranks of one job")


def test_ingest_recognizes_the_ranks_of_one_job_in_a_folder(warehouse_copy: Path, tmp_path: Path,
                                                            job_tags: JobTags) -> None:
    job = tmp_path / "dlrm_8rank"
    for rank in range(8):
        copy_rank(rank, job)
    result = run_cli("ingest", str(job), "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    assert "job dlrm_8rank: 8 of 8 ranks on 1 node (deviceProperties)" in result.stdout
    tags = job_tags()
    assert {name: (t["job"], t["job_rank"]) for name, t in tags.items()} == {
        path.name: ("dlrm_8rank", str(rank)) for rank, path in DLRM_RANKS.items()}
    # --job renames it: the same traces, one job of the new name
    renamed = run_cli("ingest", str(job), "--job", "dlrm_nightly", "--warehouse", str(warehouse_copy))
    assert renamed.returncode == 0, renamed.stderr
    assert {t["job"] for t in job_tags().values()} == {"dlrm_nightly"}


def test_ingest_of_unrelated_traces_notes_it_and_tags_no_job(warehouse_copy: Path, tmp_path: Path,
                                                            job_tags: JobTags) -> None:
    folder = tmp_path / "mixed"
    copy_rank(0, folder)
    write_rank(1, folder, "worker1_of_16.json.gz", {"backend": "nccl", "rank": 1, "world_size": 16})
    result = run_cli("ingest", str(folder), "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {folder} is not one job (world sizes 8, 16); its traces are ingested each on its own "
                     "(--job NAME tags them as one)"]
    assert all(not tags for tags in job_tags().values())
    with_job = run_cli("ingest", str(folder), "--job", "mixed", "--warehouse", str(warehouse_copy), "--quiet")
    _one_line_error(with_job, "world sizes disagree")


def test_nodes_from_gpus_per_node(warehouse_copy: Path, tmp_path: Path, job_tags: JobTags) -> None:
    job = tmp_path / "dlrm"
    for rank in range(8):
        copy_rank(rank, job)
    result = run_cli("ingest", str(job), "--job", "dlrm", "--gpus-per-node", "4", "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    assert "8 of 8 ranks on 2 nodes (gpus_per_node)" in result.stdout
    tags = job_tags()
    assert {int(t["job_rank"]): (int(t["job_node"]), t["job_node_source"]) for t in tags.values()} == {
        rank: (0 if rank < 4 else 1, "gpus_per_node") for rank in range(8)}


def test_nodes_from_hosts_in_the_file_names(warehouse_copy: Path, tmp_path: Path, job_tags: JobTags) -> None:
    job = tmp_path / "dlrm"
    hosts = {0: "host-b", 1: "host-b", 2: "host-a", 3: "host-a"}  # numbered in sorted order: host-a is node 0
    for rank, host in hosts.items():
        copy_rank(rank, job / host)  # the host is the folder the rank sits in
    result = run_cli("ingest", str(job), "--job", "dlrm", "--gpus-per-node", "1", "--warehouse", str(warehouse_copy))
    assert result.returncode == 0, result.stderr
    assert "4 of 8 ranks on 2 nodes (host_in_file_name); missing ranks: 4-7" in result.stdout
    assert "--gpus-per-node is not used: the file names name each rank's host" in result.stderr
    tags = job_tags()
    assert {int(t["job_rank"]): (t["job_node"], t["job_host"], t["job_node_source"]) for t in tags.values() if t} == {
        0: ("1", "host-b", "host_in_file_name"), 1: ("1", "host-b", "host_in_file_name"),
        2: ("0", "host-a", "host_in_file_name"), 3: ("0", "host-a", "host_in_file_name")}


def test_a_job_name_keeps_to_one_job(warehouse_copy: Path, tmp_path: Path, job_tags: JobTags) -> None:
    job = tmp_path / "dlrm"
    for rank in range(4):
        copy_rank(rank, job)
    assert run_cli("ingest", str(job), "--job", "dlrm", "--warehouse", str(warehouse_copy)).returncode == 0
    (job / DLRM_RANKS[3].name).unlink()  # the folder changed: rank 3 is no member any more
    again = run_cli("ingest", str(job), "--job", "dlrm", "--warehouse", str(warehouse_copy))
    assert again.returncode == 0, again.stderr
    assert "note: 1 trace(s) of job dlrm no longer in" in again.stderr
    assert sorted(int(t["job_rank"]) for t in job_tags().values() if t) == [0, 1, 2]
    elsewhere = tmp_path / "other" / "dlrm"  # another folder's job of the same name is refused
    copy_rank(5, elsewhere)
    refused = run_cli("ingest", str(elsewhere), "--job", "dlrm", "--warehouse", str(warehouse_copy), "--quiet")
    _one_line_error(refused, f"the warehouse holds another job of this name (3 trace(s), from {job})",
                    "--job NAME", "tracelake rm job=dlrm")


def test_flags_that_do_not_fit_a_job_are_refused(tmp_path: Path) -> None:
    job = tmp_path / "dlrm"
    copy_rank(0, job)
    copy_rank(1, job)
    warehouse = tmp_path / "wh"
    for args, fragment in (
            (["--compare", str(DLRM_RANKS[2])], "a job's analysis takes no --compare"),
            (["--capture-folder", str(tmp_path)], "--capture-folder belongs to one graph-replay trace"),
            (["--job", "a/b"], "is not a job name")):
        result = run_cli("analyze", str(job), *args, "--warehouse", str(warehouse))
        assert result.returncode == 2, result.stderr
        assert result.stderr.count("\n") == 1 and fragment in result.stderr, result.stderr
    single = run_cli("analyze", str(DLRM_RANKS[0]), "--gpus-per-node", "4", "--warehouse", str(warehouse))
    assert single.returncode == 2 and "--gpus-per-node places a job's ranks on nodes" in single.stderr
    tagged = run_cli("ingest", str(job), "--tag", "job=x", "--warehouse", str(warehouse))
    assert tagged.returncode == 2 and "job is a job tag" in tagged.stderr and "--job NAME" in tagged.stderr
    assert not warehouse.exists()  # each refused before any work
