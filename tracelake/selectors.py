"""Turn what a user typed for a trace into warehouse trace ids.

A selector string is, in this order:
- a trace file (.json / .json.gz) that exists: ingested if new (content-hash ids, so a no-op when
  it is already there), giving its trace id; a missing *.json / *.json.gz path is an error;
- `key=value[,key=value...]`: every trace whose `runs` column (model, run, commit, mode, platform)
  or, for other keys, whose tag `key` equals value (case-insensitive; all pairs must hold);
- 6 to 16 hex digits: a trace id, or a prefix of exactly one trace id;
- `job:NAME`: the ranks of a multi-rank job (its traces tagged job=NAME, docs/jobs.md), by rank.
"""

from __future__ import annotations

import re
from pathlib import Path

from tracelake.core.errors import BadTraceError, TraceLakeError
from tracelake.warehouse import Warehouse

TRACE_SUFFIXES = (".json", ".json.gz")
RUNS_COLUMNS = ("model", "run", "commit", "mode", "platform")  # the runs view's tag columns
TRACE_ID_PATTERN = re.compile(r"[0-9a-f]{6,16}")
MAX_LISTED = 5  # trace ids named in an ambiguous-prefix message
JOB_PREFIX = "job:"


class SelectorError(TraceLakeError):
    """A trace selector matches no trace, several when one is needed, or is malformed."""


def resolve_traces(warehouse: Warehouse, selector: str, jobs: int = 1, ingest_new: bool = True) -> list[str]:
    """The trace ids a selector names, in a stable order; raises a one-line TraceLakeError. With
    `ingest_new` off, a trace file must be in the warehouse already (`rm`: nothing is added)."""
    text = selector.strip()
    if not text:
        raise SelectorError("empty trace selector; give a trace file, a trace id or KEY=VALUE")
    name = job_name(text)
    if name is not None:
        return job_trace_ids(warehouse, resolve_job(warehouse, name))
    path = Path(text).expanduser()
    if path.is_file():
        return [_ingest_file(warehouse, path, jobs) if ingest_new else _stored_file(warehouse, path)]
    if path.is_dir():
        raise SelectorError(f"{text} is a folder; give one trace file, a trace id or a KEY=VALUE selector")
    if text.lower().endswith(TRACE_SUFFIXES):
        raise BadTraceError(f"{text}: no such file; check the path")
    if "=" in text:
        return _match_tags(warehouse, text)
    if TRACE_ID_PATTERN.fullmatch(text.lower()):
        return [_match_trace_id(warehouse, text.lower())]
    if "/" in text:
        raise BadTraceError(f"{text}: no such file; check the path")
    raise SelectorError(
        f"{text!r} is not a trace file, a trace id (6-16 hex digits) or a KEY=VALUE[,KEY=VALUE] selector"
    )


def job_name(selector: str) -> str | None:
    """The job a `job:NAME` selector names; None for any other selector."""
    text = selector.strip()
    if not text.lower().startswith(JOB_PREFIX):
        return None
    name = text[len(JOB_PREFIX):].strip()
    if not name:
        raise SelectorError(f"selector {selector!r} names no job; give job:NAME (`tracelake sql \"select job_id from "
                            "jobs\"` lists them)")
    return name


def resolve_job(warehouse: Warehouse, name: str) -> str:
    """The job's id as stored (the `jobs` mart); one line naming the warehouse's jobs when none matches."""
    with warehouse.connect_read_only() as con:
        has_jobs = con.execute("select count(*) from duckdb_views() where view_name = 'jobs'").fetchone()
        names = [row[0] for row in con.execute("select job_id from jobs order by job_id").fetchall()] \
            if has_jobs and has_jobs[0] else []
    if name in names:
        return name
    folded = [n for n in names if n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0]
    held = ", ".join(names[:MAX_LISTED]) + (", ..." if len(names) > MAX_LISTED else "")
    raise SelectorError(f"no job {name!r} in {warehouse.root}; " + (f"its jobs: {held}" if names else
                        "it holds none (ingest a folder of rank traces, or pass --job NAME)"))


def job_trace_ids(warehouse: Warehouse, job_id: str) -> list[str]:
    """The traces of a job's ranks, by rank."""
    with warehouse.connect_read_only() as con:
        return [row[0] for row in con.execute("select trace_id from job_ranks where job_id = ? order by rank",
                                              [job_id]).fetchall()]


def _ingest_file(warehouse: Warehouse, path: Path, jobs: int) -> str:
    from tracelake.ingestion import ingest_paths  # noqa: PLC0415 - here only: `tag` and `rm` ingest nothing

    report = ingest_paths([path], warehouse, {}, jobs)
    for outcome in report.outcomes:
        if outcome.status == "failed":
            raise BadTraceError(outcome.message)
        if outcome.trace_id:
            return outcome.trace_id
    raise BadTraceError(f"{path}: not a profiler trace")


def _stored_file(warehouse: Warehouse, path: Path) -> str:
    from tracelake.ingest.reader import file_sha256  # noqa: PLC0415
    from tracelake.ingest.trace_ingest import trace_id_from_sha256  # noqa: PLC0415

    trace_id = trace_id_from_sha256(file_sha256(path))
    if trace_id not in warehouse.modelled_trace_ids():
        raise SelectorError(f"{path} (trace {trace_id}) is not in {warehouse.root}; `tracelake traces` lists them")
    return trace_id


def parse_tag_selector(text: str) -> dict[str, str]:
    """`model=x,run=r1` -> {"model": "x", "run": "r1"}."""
    pairs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise SelectorError(f"selector {text!r}: {part.strip()!r} is not KEY=VALUE")
        if key in pairs:
            raise SelectorError(f"selector {text!r}: {key} is given twice")
        pairs[key] = value
    return pairs


def _match_tags(warehouse: Warehouse, text: str) -> list[str]:
    pairs = parse_tag_selector(text)
    conditions, params = [], []
    for key, value in pairs.items():
        if key.lower() in RUNS_COLUMNS:
            conditions.append(f"lower({key.lower()}) = lower(?)")
            params.append(value)
        else:
            conditions.append("lower(tags[?]) = lower(?)")
            params.extend([key, value])
    query = f"select trace_id from runs where {' and '.join(conditions)} order by ingested_at, trace_id"
    with warehouse.connect_read_only() as con:
        trace_ids = [row[0] for row in con.execute(query, params).fetchall()]
    if not trace_ids:
        raise SelectorError(
            f"selector {text!r} matches no trace in {warehouse.root}; `tracelake traces` lists the tags"
        )
    return trace_ids


def _match_trace_id(warehouse: Warehouse, prefix: str) -> str:
    with warehouse.connect_read_only() as con:
        rows = con.execute(
            "select trace_id from traces where starts_with(trace_id, ?) order by trace_id", [prefix]
        ).fetchall()
    matches = [row[0] for row in rows]
    if not matches:
        raise SelectorError(f"no trace {prefix} in {warehouse.root}; `tracelake traces` lists the trace ids")
    if len(matches) > 1:
        listed = ", ".join(matches[:MAX_LISTED]) + (", ..." if len(matches) > MAX_LISTED else "")
        raise SelectorError(f"trace id prefix {prefix} is ambiguous ({len(matches)} traces: {listed}); give more digits")
    return matches[0]


def resolve_one_trace(warehouse: Warehouse, selector: str, command: str) -> str:
    """The one stored trace a selector names (nothing is ingested); none or several is a one-line
    TraceLakeError naming `command`, which takes one trace."""
    trace_ids = resolve_traces(warehouse, selector, ingest_new=False)
    if len(trace_ids) != 1:
        raise TraceLakeError(f"{selector!r} names {len(trace_ids)} traces; {command} takes one (give its trace id)")
    return trace_ids[0]
