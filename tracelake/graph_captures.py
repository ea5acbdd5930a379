"""Which capture traces belong to which GPU-graph replay trace, as ingest records it.

A serving engine replays GPU graphs; the ops, shapes and module stacks of the replayed kernels are in
the traces taken while the graphs were captured (TraceLens' `--capture_folder`: a folder of capture
traces with an `execution_details.json` listing each file's batch size and mode). Ingest stores the
link as tags: the replay trace lists its captures (`graph_capture_traces`), each capture its batch
size and mode. The merge itself is the dbt models' (graph_kernel_map, int_host_ops_merged)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tracelake.core.errors import BadTraceError
from tracelake.ingest.reader import is_trace_file

EXECUTION_DETAILS = "execution_details.json"
# TraceLens' folder name for capture traces (dbt var capture_trace_folder says the same)
CAPTURE_FOLDER_NAME = "capture_traces"
REPLAY_TAG = "graph_capture_traces"
BATCH_SIZE_TAG = "graph_capture_batch_size"
MODE_TAG = "graph_capture_mode"
CAPTURE_MODES = ("FULL", "PIECEWISE")
OUTSIDE_NAMES_SHOWN = 3  # skipped capture file names a note lists


@dataclass(frozen=True)
class CaptureFile:
    path: Path
    batch_size: int | None = None
    mode: str | None = None

    def tags(self) -> dict[str, str]:
        tags = {}
        if self.batch_size is not None:
            tags[BATCH_SIZE_TAG] = str(self.batch_size)
        if self.mode is not None:
            tags[MODE_TAG] = self.mode
        return tags


def _inside(path: Path, folder: Path) -> bool:
    """`path` is in `folder` once both are resolved: no `..`, absolute path or link leads out of it."""
    return path.resolve().is_relative_to(folder.resolve())


def _details_entry(folder: Path, entry: object, index: int) -> CaptureFile | None:
    """The capture file an entry names; None when it names a file outside the folder (skipped)."""
    where = f"{folder / EXECUTION_DETAILS}: entry {index + 1}"
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise BadTraceError(f"{where} has no \"file\" name; each entry is {{\"file\", \"batch_size\", \"mode\"}}")
    path = folder / entry["file"]
    if not _inside(path, folder):
        return None
    if not path.is_file():
        raise BadTraceError(f"{where} names {entry['file']!r}, which is not in the capture folder")
    batch_size = entry.get("batch_size")
    if batch_size is not None and (not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1):
        raise BadTraceError(f"{where}: batch_size {batch_size!r} is not a positive whole number")
    mode = entry.get("mode")
    if mode is not None and str(mode).upper() not in CAPTURE_MODES:
        raise BadTraceError(f"{where}: mode {mode!r} is neither FULL nor PIECEWISE")
    return CaptureFile(path, batch_size, str(mode).upper() if mode is not None else None)


def read_capture_folder(folder: Path) -> list[CaptureFile]:
    """The capture traces of `folder`: those execution_details.json lists (with their batch size and
    mode), else every trace file in it (batch size and mode then come from each capture's
    `capture_<bs>_<mode>` annotation, in the models)."""
    if not folder.is_dir():
        raise BadTraceError(f"{folder}: capture folder does not exist")
    details = folder / EXECUTION_DETAILS
    if details.is_file():
        try:
            entries = json.loads(details.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadTraceError(f"{details}: not readable JSON ({exc})") from None
        if not isinstance(entries, list) or not entries:
            raise BadTraceError(f"{details}: expected a non-empty list of {{\"file\", \"batch_size\", \"mode\"}}")
        named = [_details_entry(folder, entry, i) for i, entry in enumerate(entries)]
        captures = [capture for capture in named if capture is not None]
        outside = [str(entry["file"]) for entry, capture in zip(entries, named) if capture is None]
        _note_outside(details, outside)
        if not captures:
            raise BadTraceError(f"{details} names no file inside the capture folder {folder}")
        return captures
    found = sorted(p for p in folder.iterdir() if is_trace_file(p) and p.name != EXECUTION_DETAILS)
    files = [p for p in found if _inside(p, folder)]
    _note_outside(folder, [p.name for p in found if p not in files])
    if not files:
        raise BadTraceError(f"{folder}: capture folder holds no .json or .json.gz trace files")
    return [CaptureFile(p) for p in files]


def _note_outside(source: Path, names: list[str]) -> None:
    """Files outside the capture folder are never read: say how many were skipped, and which."""
    if names:
        shown = ", ".join(repr(name) for name in names[:OUTSIDE_NAMES_SHOWN])
        more = f" and {len(names) - OUTSIDE_NAMES_SHOWN} more" if len(names) > OUTSIDE_NAMES_SHOWN else ""
        print(f"tracelake: note: {source}: skipped {len(names)} capture file(s) outside the capture folder "
              f"({shown}{more}); only files inside it are read", file=sys.stderr)


def folder_capture_links(files: list[Path]) -> dict[Path, list[CaptureFile]]:
    """For a folder ingest: the files under a `capture_traces/` folder are the captures of the trace
    files beside that folder."""
    links: dict[Path, list[CaptureFile]] = {}
    capture_dirs = sorted({p.parent for p in files if p.parent.name == CAPTURE_FOLDER_NAME})
    for capture_dir in capture_dirs:
        replays = [p for p in files if p.parent == capture_dir.parent]
        if not replays:
            continue
        captures = read_capture_folder(capture_dir)
        for replay in replays:
            links[replay] = captures
    return links


# The tags the models read: a replay's marts follow its capture list, and the batch size and mode of
# each capture it lists (graph_kernel_map). A change to one of them re-models those replays.
REPLAY_MODELLING_TAGS = (REPLAY_TAG,)
CAPTURE_MODELLING_TAGS = (BATCH_SIZE_TAG, MODE_TAG)
TRACE_ID_LENGTH = 16


def linked_captures(tags: dict[str, str]) -> set[str]:
    """The capture trace ids a replay trace's tags list (as the staging model splits them)."""
    return {part for part in tags.get(REPLAY_TAG, "").split(",") if part}


def check_link_tags(tags: dict[str, str], trace_ids: set[str], tagged: list[str]) -> dict[str, str]:
    """`tags` with the graph-capture keys checked (a capture list of traces in the warehouse other than
    the traces tagged, a positive batch size, FULL or PIECEWISE) and normalised; BadTraceError else."""
    checked = dict(tags)
    if REPLAY_TAG in tags:
        captures = [part.strip().lower() for part in tags[REPLAY_TAG].split(",") if part.strip()]
        for capture in captures:
            if capture not in trace_ids or len(capture) != TRACE_ID_LENGTH:
                raise BadTraceError(f"{REPLAY_TAG}: {capture!r} is not the full id of a trace in the warehouse; "
                                    "`tracelake traces` lists them (ingest the capture trace first)")
            if capture in tagged:
                raise BadTraceError(f"{REPLAY_TAG}: trace {capture} cannot be a capture of itself")
        checked[REPLAY_TAG] = ",".join(sorted(set(captures)))
    if BATCH_SIZE_TAG in tags and not (tags[BATCH_SIZE_TAG].isdigit() and int(tags[BATCH_SIZE_TAG]) >= 1):
        raise BadTraceError(f"{BATCH_SIZE_TAG}={tags[BATCH_SIZE_TAG]!r} is not a positive whole number")
    if MODE_TAG in tags:
        if tags[MODE_TAG].upper() not in CAPTURE_MODES:
            raise BadTraceError(f"{MODE_TAG}={tags[MODE_TAG]!r} is neither FULL nor PIECEWISE")
        checked[MODE_TAG] = tags[MODE_TAG].upper()
    return checked
