"""Read a trace file (.json or .json.gz) into bytes and split off its event list.

Only regular files are read: a FIFO, a device or a socket is refused from its `stat` before it is
opened (and opened non-blocking, so a file swapped for a FIFO meanwhile cannot hang the read).
Files and their decompressed JSON above the limits in ingest/limits.py are refused, not read
until memory runs out.
"""

from __future__ import annotations

import hashlib
import os
import stat
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tracelake.core.errors import BadTraceError, NotATraceError
from tracelake.decoding.limits import MAX_JSON_DEPTH, MAX_TRACE_FILE_BYTES, MAX_TRACE_JSON_BYTES

TRACE_SUFFIXES = (".json", ".json.gz")
HASH_CHUNK_BYTES = 8 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and checks the CRC and length
_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENT_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass(frozen=True)
class TraceDocument:
    """The top level of a Chrome-trace JSON file with the events left undecoded."""

    raw_events: list[msgspec.Raw]
    metadata: dict[str, Any]
    uncompressed_bytes: int
    repaired: Counter[str] = field(default_factory=Counter)  # values changed so the JSON decodes
    masked_secrets: int = 0  # metadata values stored as "***"


def is_trace_file(path: Path) -> bool:
    """A regular file (symlinks followed) named like a trace; FIFOs, devices, sockets never are."""
    if not path.name.endswith(TRACE_SUFFIXES):
        return False
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


@contextmanager
def _reading(path: Path) -> Iterator[None]:
    """Turn the ways a trace file cannot be read into one-line user errors."""
    try:
        yield
    except FileNotFoundError:
        raise BadTraceError(f"{path}: file not found; check the path") from None
    except IsADirectoryError:
        raise BadTraceError(f"{path}: is a directory, expected a .json or .json.gz trace") from None
    except PermissionError:
        raise BadTraceError(f"{path}: permission denied; make the file readable") from None
    except OSError as exc:
        raise BadTraceError(f"{path}: cannot be read ({exc.strerror or exc}); check the file") from None


def _size_text(size: int) -> str:
    return f"{size:,} bytes ({size / (1 << 30):.1f} GiB)" if size >= 1 << 30 else f"{size:,} bytes"


def _check_regular(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(status.st_mode)), "not a regular file")
        if kind == "a directory":
            raise BadTraceError(f"{path}: is a directory, expected a .json or .json.gz trace")
        raise BadTraceError(f"{path}: is {kind}, not a regular file; give a .json or .json.gz trace file")
    if status.st_size > MAX_TRACE_FILE_BYTES:
        raise BadTraceError(
            f"{path}: file is {_size_text(status.st_size)}, above the {_size_text(MAX_TRACE_FILE_BYTES)} "
            "limit for one trace; profile fewer steps"
        )


@contextmanager
def _open_regular(path: Path) -> Iterator[Any]:
    """The file opened for reading once `stat` shows a regular file within the size limit."""
    with _reading(path):
        _check_regular(path, path.stat())
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            _check_regular(path, os.fstat(fd))  # the file that was opened, not the one stat saw
            handle = os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise
        with handle:
            yield handle


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with _open_regular(path) as handle:
        read = 0
        while chunk := handle.read(HASH_CHUNK_BYTES):
            read += len(chunk)
            if read > MAX_TRACE_FILE_BYTES:
                _check_regular(path, os.fstat(handle.fileno()))  # it grew while being read
            digest.update(chunk)
    return digest.hexdigest()


def read_file_bytes(path: Path) -> bytes:
    with _open_regular(path) as handle:
        data = handle.readall()
        if len(data) > MAX_TRACE_FILE_BYTES:  # it grew while being read
            _check_regular(path, os.fstat(handle.fileno()))
        return data


def read_and_hash(path: Path) -> tuple[bytes, str]:
    """The file's bytes and their sha256 (hex), which the trace id comes from."""
    data = read_file_bytes(path)
    return data, hashlib.sha256(data).hexdigest()


class PreRead:
    """File bytes a caller already read (to hash them), handed over exactly once so that no
    caller frame keeps a large trace alive after it is parsed."""

    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def take(self) -> bytes | None:
        data, self._data = self._data, None
        return data


def _gunzip(path: Path, data: bytes) -> bytes:
    """Every gzip member of `data`, decompressed as a stream that stops past MAX_TRACE_JSON_BYTES."""
    members: list[bytes] = []
    total = 0
    rest = data
    while rest:
        stream = zlib.decompressobj(_GZIP_WBITS)
        try:
            member = stream.decompress(rest, MAX_TRACE_JSON_BYTES + 1 - total)
        except zlib.error as exc:
            raise BadTraceError(f"{path}: gzip data is corrupt ({exc}); re-copy or re-export the trace") from None
        total += len(member)
        if total > MAX_TRACE_JSON_BYTES:
            raise BadTraceError(
                f"{path}: decompresses to more than {_size_text(MAX_TRACE_JSON_BYTES)} of JSON (the limit for "
                f"one trace; the file is {_size_text(len(data))}); profile fewer steps"
            )
        if not stream.eof:
            raise BadTraceError(f"{path}: gzip data is truncated; re-copy or re-export the trace")
        members.append(member)
        del member
        rest = stream.unused_data.lstrip(b"\x00")
        if rest and rest[:2] != _GZIP_MAGIC:
            raise BadTraceError(f"{path}: gzip data is followed by other bytes; re-copy or re-export the trace")
    return b"".join(members)  # one member: the same object, no copy


def read_trace_bytes(path: Path, pre_read: PreRead | None = None) -> bytes:
    """The trace's JSON bytes (gunzipped when needed), from `pre_read` when the caller has them."""
    raw = pre_read.take() if pre_read is not None else None
    data = read_file_bytes(path) if raw is None else raw
    del raw
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(path, data)
    elif len(data) > MAX_TRACE_JSON_BYTES:
        raise BadTraceError(
            f"{path}: {_size_text(len(data))} of JSON, above the {_size_text(MAX_TRACE_JSON_BYTES)} "
            "limit for one trace; profile fewer steps"
        )
    if not data.strip():
        raise BadTraceError(f"{path}: file is empty; expected a PyTorch profiler trace")
    return data


def _top_level(path: Path, data: bytes) -> dict[str, msgspec.Raw]:
    try:
        return _TOP_LEVEL.decode(data)
    except msgspec.ValidationError:
        raise NotATraceError(
            f"{path}: JSON top level is not an object; expected a Chrome trace with 'traceEvents'"
        ) from None


def _decode_top_level(path: Path, data: bytes) -> tuple[dict[str, msgspec.Raw], bytes, Counter[str]]:
    """The top-level object with its values undecoded; JSON msgspec rejects is repaired once
    (ingest/json_repair.py) before the file is refused."""
    from tracelake.decoding.json_repair import repair_json, repair_utf8, valid_utf8  # noqa: PLC0415 - numpy stays out of the read-ahead thread

    repaired: Counter[str] = Counter()
    if not valid_utf8(data):  # msgspec leaves the strings inside skipped values unchecked
        data, repaired["invalid_utf8"] = repair_utf8(data)
    try:
        return _top_level(path, data), data, repaired
    except (msgspec.DecodeError, RecursionError) as exc:
        error = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    data, fixes = repair_json(data, MAX_JSON_DEPTH)
    if fixes:
        try:
            return _top_level(path, data), data, repaired + fixes
        except (msgspec.DecodeError, RecursionError):
            pass
    raise BadTraceError(f"{path}: not valid JSON ({error}); is the file complete?")


def parse_trace_document(path: Path, data: bytes) -> TraceDocument:
    """Validate the JSON and return the event list as raw slices plus the other top-level keys."""
    from tracelake.decoding.metadata import decode_metadata  # noqa: PLC0415 - see _decode_top_level

    uncompressed_bytes = len(data)
    top, data, repaired = _decode_top_level(path, data)
    if "traceEvents" not in top:
        raise NotATraceError(
            f"{path}: JSON has no 'traceEvents' list; is this a torch.profiler Chrome trace?"
        )
    try:
        raw_events = _EVENT_LIST.decode(top.pop("traceEvents"))
    except msgspec.ValidationError:
        raise BadTraceError(f"{path}: 'traceEvents' is not a list") from None
    if not raw_events:
        raise BadTraceError(f"{path}: 'traceEvents' is empty; the profiler recorded nothing")
    metadata = decode_metadata(top)
    return TraceDocument(
        raw_events=raw_events,
        metadata=metadata.values,
        uncompressed_bytes=uncompressed_bytes,
        repaired=repaired + metadata.repaired,
        masked_secrets=metadata.masked_secrets,
    )
