"""Tag changes applied all or nothing, with the marts that read the changed tags re-modelled.

A trace's tags live in its one-row `trace_files` Parquet file. A tag change (`tracelake tag`, or an
ingest that adds tags) is a journal in the warehouse's pending area:

1. every changed trace's new file is written into a locked staging folder there (never beside the
   partition, so a kill leaves nothing in it);
2. `journal.json` (the files to move, the traces to re-model) is written into that folder atomically;
   from then on the change is decided;
3. the files are renamed over the partitions' files;
4. the traces whose marts read a changed tag are re-modelled (tracelake/warehouse.py: the next model
   update takes every decided journal), and the journal goes once that update is published.

A run killed before step 2 leaves a folder without a journal, which the next command removes; one
killed later leaves a journal, which the next command rolls forward (renames the files still to
move, re-models the traces). Only the models read the graph-capture tags
(tracelake/graph_captures.py); the other tags are read by views, so they need no re-model.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from tracelake.analysis_tables import ANALYSIS_TABLES
from tracelake.crashpoints import crash_point
from tracelake.staging import StagingFolder, dead_staging, replace_file

JOURNAL_NAME = "journal.json"
JOURNAL_LABEL = "tag"


def read_tags(partition_file: Path) -> dict[str, str]:
    import pyarrow.parquet as pq  # noqa: PLC0415 - here only: `tracelake sql` starts without pyarrow

    return dict(pq.read_table(partition_file, columns=["tags"]).column("tags")[0].as_py() or [])


def traces_to_remodel(before: dict[str, dict[str, str]], after: dict[str, dict[str, str]],
                      every_trace: Callable[[], dict[str, dict[str, str]]], known: set[str]) -> set[str]:
    """The traces whose marts read a tag that changed from `before` to `after` (the tags of the
    traces changed), with the captures they list (an update reads only its traces' partitions).
    `every_trace()`: the tags of every trace once the change is made, read only when a capture's
    tags changed (to find the replays listing it); `known`: the traces in the warehouse."""
    # here only: the module reads trace files, which `tracelake sql` (importing the warehouse) never does
    from tracelake.graph_captures import CAPTURE_MODELLING_TAGS, REPLAY_MODELLING_TAGS, linked_captures  # noqa: PLC0415

    def changed(trace_id: str, keys: tuple[str, ...]) -> bool:
        return any(before[trace_id].get(key) != after[trace_id].get(key) for key in keys)

    replays = {trace_id for trace_id in after if changed(trace_id, REPLAY_MODELLING_TAGS)}
    tags_of = after
    recaptured = {trace_id for trace_id in after if changed(trace_id, CAPTURE_MODELLING_TAGS)}
    if recaptured:
        tags_of = every_trace()
        replays |= {replay for replay, tags in tags_of.items() if linked_captures(tags) & recaptured}
    captures = {capture for replay in replays for capture in linked_captures(tags_of[replay])}
    return replays | (captures & known)


@dataclass
class TagJournal:
    """One tag change: staged files, then the journal, then the renames."""

    folder: Path
    renames: dict[str, str] = field(default_factory=dict)  # trace id -> the partition file it replaces
    remodel: list[str] = field(default_factory=list)
    _staging: StagingFolder | None = None

    @classmethod
    def begin(cls, pending_dir: Path) -> TagJournal:
        staging = StagingFolder(pending_dir, JOURNAL_LABEL, clean=False)  # dead journals are rolled forward
        return cls(staging.path, _staging=staging)

    def stage(self, trace_id: str, table: object, target: Path) -> None:
        """Write the new `trace_files` table of `trace_id`, which will replace `target`."""
        from tracelake.ingest.parquet_io import write_file  # noqa: PLC0415 - the settings every trace table has

        write_file(table, self.folder / f"{trace_id}.parquet")
        self.renames[trace_id] = str(target)

    def decide(self, remodel: Iterable[str]) -> None:
        """Write the journal: the change is made from here on, by this run or the next command."""
        self.remodel = sorted(remodel)
        crash_point("tag-staged")
        replace_file(self.folder / JOURNAL_NAME, json.dumps({"renames": self.renames, "remodel": self.remodel}).encode())
        crash_point("tag-decided")

    def apply(self) -> None:
        """Move the staged files over the partitions' files (those not moved yet)."""
        for index, (trace_id, target) in enumerate(sorted(self.renames.items())):
            staged = self.folder / f"{trace_id}.parquet"
            if staged.exists() and Path(target).parent.is_dir():  # a trace removed meanwhile keeps no file
                os.replace(staged, target)
            if index == 0:
                crash_point("tag-renamed-first")

    @property
    def owned(self) -> bool:
        """Whether this process made the change (else: a dead run's, rolled forward)."""
        return self._staging is not None

    def close(self) -> None:
        """Remove the journal's folder (the change is complete)."""
        if self._staging is not None:
            self._staging.close()
            self._staging = None
        else:
            shutil.rmtree(self.folder, ignore_errors=True)


def roll_forward_dead(pending_dir: Path) -> list[TagJournal]:
    """The decided journals of dead runs, their renames applied; the caller re-models their traces and
    then removes them (`finish`). Undecided ones (no journal file) are removed here."""
    journals: list[TagJournal] = []
    for folder in dead_staging(pending_dir, JOURNAL_LABEL):
        try:
            data = json.loads((folder / JOURNAL_NAME).read_text())
        except (OSError, ValueError):
            shutil.rmtree(folder, ignore_errors=True)
            continue
        journal = TagJournal(folder, dict(data["renames"]), list(data["remodel"]))
        journal.apply()
        journals.append(journal)
    return journals


def finish_journals(journals: list[TagJournal]) -> None:
    for journal in journals:
        journal.close()


def forget_tag_modelled(con: duckdb.DuckDBPyConnection, every_trace: dict[str, dict[str, str]],
                        retagged: set[str]) -> None:
    """Before dbt's incremental run (`tracelake build`): take the rows of the traces whose marts read
    graph-capture tags out of every model table, so that dbt models them again from the tags as they
    are now: the replay traces (listing captures in `every_trace`, the tags of every trace, or merged
    with one before) and `retagged`. A tag is no trace content: a trace id does not change with it."""
    from tracelake.graph_captures import linked_captures  # noqa: PLC0415 - it reads trace files

    replays = {trace_id for trace_id, tags in every_trace.items() if linked_captures(tags)}
    tables = con.execute(
        "select t.schema_name, t.table_name from duckdb_tables() t join duckdb_columns() c "
        "on c.table_oid = t.table_oid and c.column_name = 'trace_id' where t.schema_name <> 'raw'").fetchall()
    if ("main", "graph_kernel_map") in tables:
        replays |= {row[0] for row in con.execute("select distinct trace_id from graph_kernel_map").fetchall()}
    forget = sorted(replays | retagged)
    for schema, table in tables:
        if forget and not (schema == "main" and table in ANALYSIS_TABLES):
            con.execute(f'delete from "{schema}"."{table}" where trace_id in (select unnest($ids))', {"ids": forget})
