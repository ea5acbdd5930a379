"""Output folders TraceLake replaces (an analysis, a dashboard), and the private staging folders
that it builds them in.

An output folder is replaced only when it is new, empty, or a folder TraceLake wrote: it then holds
a marker file (`.tracelake-output.json`) naming the entries TraceLake put there. Anything else is
refused before any work starts. With `force`, a TraceLake folder into which the user put files of
their own has TraceLake's entries replaced and the user's left where they are.

The new folder is built in a staging folder beside its target (tracelake/staging.py), so that
moving it in is a rename and a killed run leaves nothing the next run does not remove.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from tracelake import __version__
from tracelake.core.errors import TraceLakeError
from tracelake.staging import StagingFolder

MARKER_NAME = ".tracelake-output.json"
# what a staging folder holds: the new content, and the folder it replaces while it is swapped
STAGED_CONTENT, RETIRED_CONTENT = "new", "retired"
FOREIGN_EXAMPLES = 3  # entries named in a refusal
OUTPUT_LABEL_CHARS = 40  # of the output folder's name in its staging folder's (a file name has at most 255 bytes)
# A marker or sign file larger than this is not one TraceLake wrote: a marker lists a report folder's
# ~15 entries in ~1 kB; the largest sign, a dashboard's data JSON, holds a few kB per trace
MARKER_MAX_BYTES = 256 << 20


class OutputFolderError(TraceLakeError):
    """An output folder TraceLake must not replace."""


class OutputMarker(BaseModel):
    """The marker file of a folder TraceLake wrote."""

    kind: str  # "analysis" | "dashboard"
    tracelake_version: str
    written_at: datetime
    entries: list[str]


@dataclass(frozen=True)
class FolderKind:
    """What TraceLake writes into one kind of output folder. A folder written before the marker
    existed is recognised by `sign` (a file only TraceLake writes there); of its entries, those
    named in `entries` are TraceLake's."""

    name: str
    sign: str
    entries: frozenset[str]


@dataclass(frozen=True)
class OutputTarget:
    path: Path
    kind: FolderKind
    ours: tuple[str, ...]  # entries TraceLake wrote there before
    foreign: tuple[str, ...]  # entries left in place (with force)
    force: bool = False


def _is_within(path: Path, folder: Path) -> bool:
    return path.is_relative_to(folder)  # the folder itself too


def _read_own_file(path: Path) -> bytes:
    """A small regular file's bytes, never through a link (a fifo would block, a link could point at
    anything); OSError for anything else."""
    handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MARKER_MAX_BYTES:
            raise OSError(f"{path} is not a marker TraceLake wrote")
        return stream.read()


def _read_marker(folder: Path) -> OutputMarker | None:
    try:
        return OutputMarker.model_validate_json(_read_own_file(folder / MARKER_NAME))
    except (OSError, ValueError):
        return None


def _entries_written(folder: Path, kind: FolderKind) -> set[str] | None:
    """The entries of `folder` that TraceLake wrote, or None when TraceLake did not write it."""
    marker = _read_marker(folder)
    if marker is not None:
        return set(marker.entries) | {MARKER_NAME} if marker.kind == kind.name else None
    if _signed_by_tracelake(folder / kind.sign):
        return {entry.name for entry in folder.iterdir()} & kind.entries
    return None


def _signed_by_tracelake(sign: Path) -> bool:
    """The sign file is one TraceLake wrote: a JSON object naming the TraceLake version."""
    try:
        content = json.loads(_read_own_file(sign))
    except (OSError, ValueError):
        return False
    return isinstance(content, dict) and "tracelake_version" in content


def _examples(names: Iterable[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:FOREIGN_EXAMPLES])
    return shown + (f" and {len(names) - FOREIGN_EXAMPLES} more" if len(names) > FOREIGN_EXAMPLES else "")


_RENAME_EXCHANGE = 2  # <linux/fs.h>
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    return done == 0


def claim_output_folder(out_dir: Path, kind: FolderKind, *, protected: Iterable[Path] = (),
                        reserved: Iterable[Path] = (), force: bool = False, option: str = "--out",
                        force_option: str | None = "--force") -> OutputTarget:
    """Check that `out_dir` may be replaced by a `kind` folder; refuse with one line otherwise.

    `protected`: paths that must never be inside what gets replaced (input traces, the warehouse).
    `reserved`: folders that an output folder must not be placed inside (the warehouse's data).
    `force_option`: the flag that sets `force`, named in the refusals (None: the command has none)."""
    out_dir = out_dir.absolute()
    named = [(path, str(path.absolute())) for path in protected] + [(Path.cwd(), f"the working folder {Path.cwd()}")]
    for path, label in named:  # replacing the working folder would leave the shell in a deleted one
        path = path.absolute()
        if _is_within(path, out_dir) or _is_within(path.resolve(), out_dir.resolve()):
            raise OutputFolderError(f"{option} {out_dir}: it holds {label}, and the output folder is replaced "
                                    f"whole; choose an {option} folder outside it")
    for folder in reserved:
        if _is_within(out_dir.resolve(), folder.resolve()):
            raise OutputFolderError(f"{option} {out_dir} is inside {folder}, which TraceLake manages; "
                                    f"choose an {option} folder elsewhere")
    if not out_dir.exists() and not out_dir.is_symlink():
        return OutputTarget(out_dir, kind, (), (), force)
    if not out_dir.is_dir() or out_dir.is_symlink():
        raise OutputFolderError(f"{option} {out_dir} is not a folder; choose a new or empty folder")
    try:
        present = {entry.name for entry in out_dir.iterdir()}
    except OSError as exc:
        raise OutputFolderError(f"{option} {out_dir} cannot be read ({exc.strerror}); choose another folder") from None
    if not present:
        return OutputTarget(out_dir, kind, (), (), force)
    ours = _entries_written(out_dir, kind)
    if ours is None:
        never = f" ({force_option} replaces only a folder TraceLake wrote, never other files)" if force_option else ""
        raise OutputFolderError(f"{option} {out_dir} holds files TraceLake did not write ({_examples(present)}); "
                                f"choose a new or empty folder{never}")
    foreign = present - ours
    if foreign and not force:
        what = (f"pass {force_option} to replace TraceLake's files and keep those" if force_option
                else "move those out")
        raise OutputFolderError(
            f"{option} {out_dir} is a TraceLake {kind.name} folder that also holds other files "
            f"({_examples(foreign)}); {what}, or choose another folder")
    return OutputTarget(out_dir, kind, tuple(sorted(present & ours)), tuple(sorted(foreign)), force)


class OutputStaging(StagingFolder):
    """The staging folder of one output folder: `content` is written, then `publish` moves it in."""

    def __init__(self, target: OutputTarget) -> None:
        super().__init__(target.path.parent, target.path.name[:OUTPUT_LABEL_CHARS])
        self.target = target
        self.content = self.path / STAGED_CONTENT
        self.content.mkdir()
        umask = os.umask(0)
        os.umask(umask)
        self.content.chmod(0o777 & ~umask)  # mkdtemp makes folders private; this one becomes the output

    def publish(self) -> None:
        """Put the content in place of the target folder; the marker goes in last."""
        target = claim_output_folder(self.target.path, self.target.kind, force=self.target.force)
        entries = sorted(entry.name for entry in self.content.iterdir() if entry.name != MARKER_NAME)
        marker = OutputMarker(kind=target.kind.name, tracelake_version=__version__,
                              written_at=datetime.now(UTC), entries=entries)
        (self.content / MARKER_NAME).write_text(marker.model_dump_json(indent=1))
        retired = self.path / RETIRED_CONTENT
        if not target.foreign:  # the whole folder is swapped (an empty folder is replaced by rename too)
            if target.ours and _exchange(self.content, target.path):
                return  # the old folder is now in the staging folder, and goes with it
            if target.ours:  # no atomic exchange on this file system: a kill between the two renames loses the old one
                os.replace(target.path, retired)
            os.replace(self.content, target.path)
            return
        # a TraceLake folder with the user's files in it: only TraceLake's entries are exchanged
        clashes = set(entries) & set(target.foreign)
        if clashes:
            raise OutputFolderError(f"{target.path} holds files of yours named like TraceLake's output "
                                    f"({_examples(clashes)}); move them, or choose another folder")
        retired.mkdir()
        (target.path / MARKER_NAME).unlink(missing_ok=True)
        for name in target.ours:
            if name != MARKER_NAME and (target.path / name).exists():
                os.replace(target.path / name, retired / name)
        for name in entries:
            os.replace(self.content / name, target.path / name)
        os.replace(self.content / MARKER_NAME, target.path / MARKER_NAME)
