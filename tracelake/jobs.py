"""A job as a first-class thing: what the command line names as one (a folder, or several files),
its ranks ingested in parallel, assembled (tracelake/job_assembly.py) and written as the membership
tags of docs/jobs.md through the tag journal (all traces or none, tracelake/tag_journal.py).

The tags say which job a trace belongs to; the marts (`job_ranks`, `jobs`, ...) read them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tracelake.core.errors import BadTraceError
from tracelake.ingestion import IngestProgress, IngestReport, ingest_paths, trace_files_in
from tracelake.job_assembly import JOB_TAG, JOB_TAGS, JobAssembly, JobError, RankFile, assemble_job
from tracelake.warehouse import Warehouse

__all__ = ["JOB_TAG", "JOB_TAGS", "JobAssembly", "JobError", "JobInput", "assign_job", "ingest_job",
           "job_input", "recognize_jobs"]

_NAME_FORBIDDEN = ("/", "\\", "\x00")


@dataclass(frozen=True)
class JobInput:
    """The trace files of one job, as the command line names them."""

    name: str
    root: Path  # the folder given, or the files' common folder: file names are read below it
    files: tuple[Path, ...]

    def label(self, path: Path) -> str:
        """`path` below the job's folder: what the rank and host patterns read, and messages name."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return path.name


def check_job_name(name: str) -> str:
    text = name.strip()
    if not text or text in (".", "..") or any(c in text for c in _NAME_FORBIDDEN) or not text.isprintable():
        raise BadTraceError(f"--job {name!r} is not a job name: give a word such as dlrm_8rank (no slashes)")
    return text


def job_input(paths: list[Path], name: str | None) -> JobInput:
    """A folder's trace files (TraceLake's own report folders in it left out), or the files given."""
    for path in paths:
        if not path.exists():
            raise BadTraceError(f"{path}: no such file or folder; check the path")
    folders = [p for p in paths if p.is_dir()]
    if folders and len(paths) > 1:
        raise BadTraceError(f"{folders[0]} is a folder: a job is one folder or several trace files, not both")
    if folders:
        root = folders[0]
        files = trace_files_in(root)
        if not files:
            raise BadTraceError(f"{root}: folder holds no .json or .json.gz trace files")
    else:
        files = list(dict.fromkeys(paths))
        root = Path(os.path.commonpath([p.resolve().parent for p in files]))
    job_name = check_job_name(name) if name is not None else root.resolve().name
    if name is None and not job_name:
        raise BadTraceError(f"{root} has no name to call the job by; give --job NAME")
    return JobInput(check_job_name(job_name), root, tuple(files))


def ingest_job(job: JobInput, warehouse: Warehouse, jobs: int, progress: IngestProgress | None = None) -> dict[Path, str]:
    """Every rank ingested (decoded in parallel on `jobs` processes): the trace id of each file. A
    file that is not a trace, or cannot be read, stops the job: one line naming each."""
    report = ingest_paths(list(job.files), warehouse, {}, jobs, progress)
    failed = report.failed + [o for o in report.outcomes if o.status == "skipped"]
    if failed:
        raise JobError(job.name, [o.message if o.status == "failed" else f"{o.path}: not a profiler trace"
                                  for o in failed])
    return {o.path: o.trace_id for o in report.outcomes if o.trace_id}


def _rank_files(warehouse: Warehouse, job: JobInput, trace_ids: dict[Path, str]) -> list[RankFile]:
    with warehouse.connect_read_only() as con:
        rows = con.execute(
            "select trace_id, distributed_info, device_count, device_name from traces "
            "where trace_id in (select unnest($ids))", {"ids": sorted(set(trace_ids.values()))}).fetchall()
    facts = {row[0]: row[1:] for row in rows}
    files = []
    for path, trace_id in trace_ids.items():
        if trace_id not in facts:
            raise BadTraceError(f"trace {trace_id} ({path}) was removed from {warehouse.root} (tracelake rm) "
                                "while the job was read; run it again")
        info, device_count, device_name = facts[trace_id]
        files.append(RankFile(trace_id, job.label(path), info, device_count or 0, device_name))
    return files


def _same_content(trace_ids: dict[Path, str]) -> list[str]:
    """Two files of the job with the same content are one trace: two ranks cannot be."""
    by_id: dict[str, list[Path]] = {}
    for path, trace_id in trace_ids.items():
        by_id.setdefault(trace_id, []).append(path)
    return [f"{paths[0].name} and {paths[1].name} are the same trace (identical content)"
            for paths in by_id.values() if len(paths) > 1]


def assign_job(warehouse: Warehouse, job: JobInput, trace_ids: dict[Path, str],
               gpus_per_node: int | None = None) -> tuple[JobAssembly, list[str]]:
    """The job's ranks and nodes decided and written as tags, all or none; the notes to show."""
    duplicates = _same_content(trace_ids)
    if duplicates:
        raise JobError(job.name, duplicates)
    assembly = assemble_job(job.name, _rank_files(warehouse, job, trace_ids), gpus_per_node, str(job.root.resolve()))
    return assembly, list(assembly.notes) + write_job_tags(warehouse, assembly)


def _current_members(warehouse: Warehouse, name: str) -> dict[str, str]:
    """trace id -> the job folder (`job_folder` tag) of the traces tagged as job `name` now."""
    with warehouse.connect_read_only() as con:
        rows = con.execute("select trace_id, coalesce(tags['job_folder'], '') from traces where tags['job'] = ?",
                           [name]).fetchall()
    return {row[0]: row[1] for row in rows}


def _jobs_of(warehouse: Warehouse, trace_ids: Iterable[str]) -> dict[str, str]:
    with warehouse.connect_read_only() as con:
        rows = con.execute("select trace_id, tags['job'] from traces where trace_id in (select unnest($ids)) "
                           "and tags['job'] is not null", {"ids": sorted(trace_ids)}).fetchall()
    return {row[0]: row[1] for row in rows}


def write_job_tags(warehouse: Warehouse, assembly: JobAssembly) -> list[str]:
    """The membership tags of `assembly`, in one tag journal. Traces of a job of this name from the
    same folder that are not in it any more (the folder's content changed) lose their job tags; a
    job of this name from another folder is refused: two jobs never share a name."""
    tags = assembly.tags()
    members = _current_members(warehouse, assembly.name)
    stale = [t for t in members if t not in tags]
    elsewhere = sorted({members[t] for t in stale if members[t] != assembly.folder})
    if elsewhere:
        raise JobError(assembly.name, [
            f"the warehouse holds another job of this name ({len(stale)} trace(s), from {elsewhere[0]}); "
            f"name this one with --job NAME, or remove the other (tracelake rm job={assembly.name})"])
    moved = {t: job for t, job in _jobs_of(warehouse, tags).items() if job != assembly.name}
    changes: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
        t: (member_tags, tuple(k for k in JOB_TAGS if k not in member_tags)) for t, member_tags in tags.items()}
    changes |= {t: ({}, JOB_TAGS) for t in stale}
    warehouse.prepare_for_writing()
    with warehouse.write_lock():
        warehouse.retag_traces(changes)
    notes = [f"{len(stale)} trace(s) of job {assembly.name} no longer in {assembly.folder} are not of the job any "
             "more"] if stale else []
    notes += [f"trace {t} was of job {job}; it is of job {assembly.name} now" for t, job in sorted(moved.items())]
    return notes


def recognize_jobs(paths: list[Path], report: IngestReport, warehouse: Warehouse, name: str | None,
                   gpus_per_node: int | None) -> list[str]:
    """After `tracelake ingest`: with `name`, the traces of `paths` are one job (else JobError);
    without, each folder whose traces carry one world size above 1 and distinct ranks is tagged
    as a job named after it, and any other folder of several traces gets a note. Lines to show."""
    ingested = {o.path: o.trace_id for o in report.outcomes if o.trace_id and o.status in ("new", "known")}
    if name is not None or gpus_per_node is not None:
        job = job_input(paths, name)
        skipped = [o for o in report.outcomes if o.status == "skipped" and o.path in set(job.files)]
        if skipped:
            raise JobError(job.name, [f"{o.path}: not a profiler trace" for o in skipped])
        assembly, notes = assign_job(warehouse, job, {p: t for p, t in ingested.items() if p in set(job.files)},
                                     gpus_per_node)
        return [assembly.summary()] + [f"note: {note}" for note in notes]
    lines = []
    for folder in (p for p in paths if p.is_dir()):
        job = job_input([folder], None)
        members = {p: t for p, t in ingested.items() if p in set(job.files)}
        if len(members) < 2:
            continue
        reason = _not_one_job(warehouse, job, members)
        if reason is not None:
            lines.append(f"note: {folder} is not one job ({reason}); its traces are ingested each on its own "
                         "(--job NAME tags them as one)")
            continue
        try:
            assembly, notes = assign_job(warehouse, job, members)
        except JobError as error:
            lines.append(f"note: {folder} is not one job ({'; '.join(error.problems)}); its traces are ingested "
                         "each on its own")
            continue
        lines += [assembly.summary()] + [f"note: {note}" for note in notes]
    return lines


def _not_one_job(warehouse: Warehouse, job: JobInput, members: dict[Path, str]) -> str | None:
    """Why a folder's traces are not recognizably one job, or None: every one carries a world size
    above 1 in its header, one world size, and distinct ranks."""
    files = _rank_files(warehouse, job, members)
    sizes = {f.header_field("world_size") for f in files}
    ranks = [f.header_field("rank") for f in files]
    if any(type(s) is not int or s < 2 for s in sizes):
        return "not every trace carries distributedInfo with a world size above 1"
    if len(sizes) > 1:
        return f"world sizes {', '.join(str(s) for s in sorted(sizes))}"  # type: ignore[type-var]
    if len(set(ranks)) < len(ranks) or any(type(r) is not int for r in ranks):
        return "ranks repeat or are missing from distributedInfo"
    return None
