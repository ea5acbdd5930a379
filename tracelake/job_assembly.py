"""The ranks of one job, decided from its ingested traces: each file's rank, the job's world size,
each rank's node; and every reason the files are not one job, each said in its own words.

Pure: the `trace_files` facts of the files in (`RankFile`, one per file: a job has tens to
thousands of files, never events), a `JobAssembly` or a `JobError` out. The rules and the tags they
become are the contract of docs/jobs.md; the file-name patterns are settings
(analyzers/settings.py: RANK_FILE_NAME_PATTERNS, HOST_FILE_NAME_PATTERNS).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field

from tracelake.analyzers import settings
from tracelake.core.errors import BadTraceError

JOB_TAG = "job"
# every tag job assembly writes (docs/jobs.md, "Membership"); a new assembly replaces them all
JOB_TAGS = ("job", "job_rank", "job_rank_source", "job_world_size", "job_world_size_source", "job_node",
            "job_node_source", "job_host", "job_folder")

_RANK_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in settings.RANK_FILE_NAME_PATTERNS)
_HOST_PATTERNS = tuple(re.compile(p, re.IGNORECASE) for p in settings.HOST_FILE_NAME_PATTERNS)
_MAX_RANK = 2**31 - 1  # trace_files.rank is an int32 column


class JobError(BadTraceError):
    """The files are not the ranks of one job (one line, exit 2); `problems` names each reason."""

    def __init__(self, job: str, problems: list[str]) -> None:
        self.problems = problems
        shown = problems[: settings.JOB_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
        super().__init__(f"job {job}: " + "; ".join(shown) + tail)


@dataclass(frozen=True)
class RankFile:
    """One ingested trace of a job, as `trace_files` holds it."""

    trace_id: str
    label: str  # its path below the job's folder: the file-name patterns read it, messages name it
    distributed_info: str | None  # the header's distributedInfo as ingested (JSON), or None
    device_count: int = 0  # len(deviceProperties)
    device_name: str | None = None

    def header_field(self, key: str) -> object:
        try:
            info = json.loads(self.distributed_info) if self.distributed_info else None
        except ValueError:
            return None
        return info.get(key) if isinstance(info, dict) else None


@dataclass(frozen=True)
class JobMember:
    trace_id: str
    label: str
    rank: int
    rank_source: str  # distributedInfo | file_name
    node: int
    node_source: str  # host_in_file_name | gpus_per_node | deviceProperties | single_node
    host: str | None = None


@dataclass(frozen=True)
class JobAssembly:
    """A job's members, their ranks and nodes; `notes` say what was decided that a reader should know."""

    name: str
    world_size: int
    world_size_source: str  # distributedInfo | files
    members: tuple[JobMember, ...]
    folder: str = ""  # the job's folder (the one given, or the files' common folder), absolute
    notes: tuple[str, ...] = field(default=())

    @property
    def missing_ranks(self) -> list[int]:
        present = {m.rank for m in self.members}
        return [r for r in range(self.world_size) if r not in present]

    @property
    def missing_ranks_text(self) -> str:
        """The missing ranks as `2, 5-127` ("" when none is)."""
        return _rank_list(self.missing_ranks)

    @property
    def node_count(self) -> int:
        return len({m.node for m in self.members})

    def tags(self) -> dict[str, dict[str, str]]:
        """The membership tags of each member trace (docs/jobs.md)."""
        tags = {}
        for m in self.members:
            tags[m.trace_id] = {
                "job": self.name, "job_rank": str(m.rank), "job_rank_source": m.rank_source,
                "job_world_size": str(self.world_size), "job_world_size_source": self.world_size_source,
                "job_node": str(m.node), "job_node_source": m.node_source, "job_folder": self.folder,
            } | ({"job_host": m.host} if m.host else {})
        return tags

    def summary(self) -> str:
        """`job dlrm: 8 of 8 ranks on 1 node (deviceProperties)`, and the ranks missing."""
        sources = sorted({m.node_source for m in self.members})
        text = (f"job {self.name}: {len(self.members)} of {self.world_size} ranks on {self.node_count} "
                f"node{'s' if self.node_count != 1 else ''} ({', '.join(sources)})")
        return text + (f"; missing ranks: {self.missing_ranks_text}" if self.missing_ranks else "")


def _rank_list(ranks: list[int]) -> str:
    """`2, 5-127`: runs of consecutive ranks as ranges."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and rank == runs[-1][-1] + 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _whole_number(value: object) -> int | None:
    return value if type(value) is int else None


def rank_in_file_name(label: str) -> int | None:
    """The first rank pattern that matches `label` (its first match), else None."""
    for pattern in _RANK_PATTERNS:
        found = pattern.search(label)
        if found is not None:
            return int(found.group(1))
    return None


def host_in_file_name(label: str) -> str | None:
    for pattern in _HOST_PATTERNS:
        found = pattern.search(label)
        if found is not None:
            return found.group(1).lower()
    return None


def _examples(labels: list[str]) -> str:
    shown = ", ".join(labels[:2])
    return shown + (f" and {len(labels) - 2} more" if len(labels) > 2 else "")


def _mixed_devices(files: list[RankFile]) -> list[str]:
    """Ranks of one job run on one kind of GPU: files of two kinds are two jobs."""
    by_device: dict[str, list[str]] = defaultdict(list)
    for f in files:
        if f.device_name:
            by_device[f.device_name].append(f.label)
    if len(by_device) < 2:
        return []
    kinds = "; ".join(f"{device}: {_examples(labels)}" for device, labels in sorted(by_device.items()))
    return [f"the files come from different GPUs ({kinds}), so they are not the ranks of one job"]


def _world_size(files: list[RankFile]) -> tuple[int | None, list[str]]:
    """distributedInfo.world_size, which every file that has one agrees on; None when no file has one."""
    by_size: dict[int, list[str]] = defaultdict(list)
    problems = []
    for f in files:
        raw = f.header_field("world_size")
        size = _whole_number(raw)
        if raw is not None and (size is None or size < 1):
            problems.append(f"{f.label}: distributedInfo.world_size {json.dumps(raw)} is not a world size")
        elif size is not None:
            by_size[size].append(f.label)
    if len(by_size) > 1:
        sizes = "; ".join(f"{size} in {_examples(labels)}" for size, labels in sorted(by_size.items()))
        problems.append(f"world sizes disagree (distributedInfo.world_size {sizes}): a folder mixing jobs? "
                        "Give the files of one job")
    return (next(iter(by_size)) if len(by_size) == 1 else None), problems


def _rank(f: RankFile) -> tuple[int | None, str, str | None]:
    """(rank, its source, a problem); distributedInfo.rank first, else the file name."""
    raw = f.header_field("rank")
    rank = _whole_number(raw)
    if raw is not None and (rank is None or not 0 <= rank <= _MAX_RANK):
        return None, "distributedInfo", f"{f.label}: distributedInfo.rank {json.dumps(raw)} is not a rank"
    if rank is not None:
        return rank, "distributedInfo", None
    named = rank_in_file_name(f.label)
    if named is not None and named <= _MAX_RANK:
        return named, "file_name", None
    return None, "", (f"{f.label}: no rank: its header has no distributedInfo.rank and its name no rank<N> or "
                      "worker<N> (rename it, e.g. rank3_<name>)")


def _nodes(ranks: dict[str, int], files: list[RankFile], gpus_per_node: int | None,
           world_size: int) -> tuple[dict[str, tuple[int, str, str | None]], list[str]]:
    """Each file's (node, source, host): hosts in every file name, else --gpus-per-node, else
    len(deviceProperties) (TraceLens' detect_gpus_per_node), else one node."""
    found = {f.trace_id: host_in_file_name(f.label) for f in files}
    hosts = {t: h for t, h in found.items() if h is not None}
    notes = []
    if len(hosts) == len(files):
        index = {host: i for i, host in enumerate(sorted(set(hosts.values())))}
        if gpus_per_node is not None:
            notes.append("--gpus-per-node is not used: the file names name each rank's host")
        return {t: (index[h], "host_in_file_name", h) for t, h in hosts.items()}, notes
    if gpus_per_node is not None:
        return {t: (r // gpus_per_node, "gpus_per_node", None) for t, r in ranks.items()}, notes
    counts = {f.device_count for f in files}
    if len(counts) == 1 and (per_node := counts.pop()) > 0:
        return {t: (r // per_node, "deviceProperties", None) for t, r in ranks.items()}, notes
    if world_size > 1 and len(files) > 1:
        notes.append("every rank is taken to run on one node: no host in the file names, no --gpus-per-node "
                     "and no deviceProperties agreed on by every file")
    return {t: (0, "single_node", None) for t in ranks}, notes


def assemble_job(name: str, files: list[RankFile], gpus_per_node: int | None = None, folder: str = "") -> JobAssembly:
    """The job of `files`, or a JobError naming every reason they are not one."""
    if not files:
        raise JobError(name, ["no trace files"])
    problems = _mixed_devices(files)
    declared_size, size_problems = _world_size(files)
    problems += size_problems
    ranks: dict[str, int] = {}
    sources: dict[str, str] = {}
    notes: list[str] = []
    for f in files:
        rank, source, problem = _rank(f)
        if problem is not None:
            problems.append(problem)
        elif rank is not None:
            ranks[f.trace_id], sources[f.trace_id] = rank, source
            named = rank_in_file_name(f.label)
            if source == "distributedInfo" and named is not None and named != rank:
                notes.append(f"{f.label} is rank {rank} (distributedInfo.rank), not {named} as its name says")
    claimed: dict[int, list[str]] = defaultdict(list)
    for f in files:
        if f.trace_id in ranks:
            claimed[ranks[f.trace_id]].append(f"{f.label} ({sources[f.trace_id]})")
    problems += [f"two files claim rank {rank}: {' and '.join(labels)}" if len(labels) == 2
                 else f"{len(labels)} files claim rank {rank}: {_examples(labels)}"
                 for rank, labels in sorted(claimed.items()) if len(labels) > 1]
    if declared_size is not None:
        world_size, size_source = declared_size, "distributedInfo"
        problems += [f"{f.label}: rank {ranks[f.trace_id]} ({sources[f.trace_id]}) is not below the world size "
                     f"{world_size} (distributedInfo)" for f in files
                     if f.trace_id in ranks and ranks[f.trace_id] >= world_size]
    else:  # no header says it: the files, or the highest rank they name
        world_size, size_source = max([len(files)] + [r + 1 for r in ranks.values()]), "files"
    if problems:
        raise JobError(name, problems)
    nodes, node_notes = _nodes(ranks, files, gpus_per_node, world_size)
    members = tuple(sorted(
        (JobMember(f.trace_id, f.label, ranks[f.trace_id], sources[f.trace_id], *nodes[f.trace_id]) for f in files),
        key=lambda m: m.rank))
    return JobAssembly(name, world_size, size_source, members, folder, tuple(notes + node_notes))
