"""Read a trace file (.json or .json.gz) into bytes and split off its event list.

Only regular files are read: a FIFO, a device or a socket is refused from its `stat` before it is
opened (and opened non-blocking, so a file swapped for a FIFO meanwhile cannot hang the read).
Files and their decompressed JSON above the limits in ingest/limits.py are refused, not read
until memory runs out.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tracelake.core.errors import BadTraceError, NotATraceError
from tracelake.ingest.limits import (
    GZIP_INPUT_STEP_BYTES,
    GZIP_OUTPUT_STEP_BYTES,
    GZIP_RATIO_CHECK_AFTER_BYTES,
    MAX_GZIP_EXPANSION_RATIO,
    MAX_JSON_DEPTH,
    MAX_TRACE_FILE_BYTES,
    MAX_TRACE_JSON_BYTES,
)

if TYPE_CHECKING:
    from tracelake.ingest.event_list import EventList

TRACE_SUFFIXES = (".json", ".json.gz")
HASH_CHUNK_BYTES = 8 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and checks the CRC and length
_ZERO_PADDING = re.compile(rb"\x00*")  # tape-style padding between gzip members
# What a file that is not (gzip of) UTF-8 JSON is, by its first bytes (each format's magic number;
# the UTF-32 byte-order marks before UTF-16's, which they start with).
_OTHER_FORMATS = (
    (b"PK\x03\x04", "a zip archive: unzip it first and give the .json inside"),
    (b"PK\x05\x06", "an empty zip archive: it holds no trace"),
    (b"BZh", "bzip2 data: decompress it first (bunzip2), or gzip the JSON"),
    (b"\xfd7zXZ\x00", "xz data: decompress it first (unxz), or gzip the JSON"),
    (b"\x5d\x00\x00", "lzma data: decompress it first (unlzma), or gzip the JSON"),
    (b"\x28\xb5\x2f\xfd", "zstd data: decompress it first (unzstd), or gzip the JSON"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive: extract it first and give the .json inside"),
    (b"\xff\xfe\x00\x00", "UTF-32 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-32 -t UTF-8)"),
    (b"\x00\x00\xfe\xff", "UTF-32 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-32 -t UTF-8)"),
    (b"\xff\xfe", "UTF-16 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", "UTF-16 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-16 -t UTF-8)"),
)
_UTF16 = "UTF-16 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-16 -t UTF-8)"
_UTF32 = "UTF-32 text: TraceLake reads UTF-8 JSON (re-encode it, e.g. iconv -f UTF-32 -t UTF-8)"
# Which of the first 4 bytes are NUL when JSON (ASCII first characters) is UTF-16 or UTF-32 without a BOM.
_UNICODE_BY_NULLS = {
    (True, True, True, False): _UTF32,
    (False, True, True, True): _UTF32,
    (True, False, True, False): _UTF16,
    (False, True, False, True): _UTF16,
}
_TOP_LEVEL: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(dict[str, msgspec.Raw])
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

    raw_events: EventList  # the event list's JSON in pieces, decoded by whoever reads a range
    metadata: dict[str, Any]
    uncompressed_bytes: int
    repaired: Counter[str] = field(default_factory=Counter)  # values changed so the JSON decodes
    masked_keys: tuple[str, ...] = ()  # the key paths of the metadata values stored as "***"


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


def _gunzip(path: Path, data: bytes) -> bytearray:
    """Every gzip member of `data`, decompressed step by step into one buffer; refused as soon as the
    JSON passes MAX_TRACE_JSON_BYTES or expands more than MAX_GZIP_EXPANSION_RATIO times the
    compressed bytes read so far, so a bomb is never inflated past what a real trace would be."""
    out = bytearray()  # grows in place: no second copy of the JSON, as a join of parts would make
    view = memoryview(data)
    start = 0
    while start < len(data):
        stream = zlib.decompressobj(_GZIP_WBITS)
        fed = start
        pending: bytes | memoryview = b""
        while not stream.eof:
            if not pending:
                if fed >= len(data):
                    raise BadTraceError(f"{path}: gzip data is truncated; re-copy or re-export the trace")
                pending = view[fed : fed + GZIP_INPUT_STEP_BYTES]
                fed += len(pending)
            room = min(GZIP_OUTPUT_STEP_BYTES, MAX_TRACE_JSON_BYTES + 1 - len(out))
            try:
                out += stream.decompress(pending, room)
            except zlib.error as exc:
                raise BadTraceError(f"{path}: gzip data is corrupt ({exc}); re-copy or re-export the trace") from None
            pending = stream.unconsumed_tail
            _check_inflation(path, len(out), fed - len(pending) - len(stream.unused_data), len(data))
        start = _ZERO_PADDING.match(data, fed - len(stream.unused_data)).end()  # type: ignore[union-attr]
        if start < len(data) and data[start : start + 2] != _GZIP_MAGIC:
            raise BadTraceError(f"{path}: gzip data is followed by other bytes; re-copy or re-export the trace")
    return out


def _check_inflation(path: Path, json_bytes: int, compressed_read: int, file_bytes: int) -> None:
    if json_bytes > MAX_TRACE_JSON_BYTES:
        raise BadTraceError(
            f"{path}: decompresses to more than {_size_text(MAX_TRACE_JSON_BYTES)} of JSON (the limit for "
            f"one trace; the file is {_size_text(file_bytes)}); profile fewer steps"
        )
    if json_bytes > GZIP_RATIO_CHECK_AFTER_BYTES and json_bytes > MAX_GZIP_EXPANSION_RATIO * compressed_read:
        raise BadTraceError(
            f"{path}: gzip data expands more than {MAX_GZIP_EXPANSION_RATIO} times ({_size_text(compressed_read)} "
            f"gave {_size_text(json_bytes)} of JSON); no profiler trace compresses that well, so it is refused "
            "as a decompression bomb; re-export the trace"
        )


def _check_format(path: Path, head: bytes, inside: str = "") -> None:
    """Refuse a file that is not UTF-8 JSON, naming what it is (from its first bytes)."""
    what = next((name for magic, name in _OTHER_FORMATS if head.startswith(magic)), None)
    if what is None and len(head) >= 4 and 0 in head[:4]:  # RFC 4627: ASCII text in UTF-16/32
        nulls = (head[0] == 0, head[1] == 0, head[2] == 0, head[3] == 0)
        what = _UNICODE_BY_NULLS.get(nulls, "binary data (a NUL byte in its first 4 bytes): not JSON text")
    if what is not None:
        raise BadTraceError(f"{path}: {inside}{what}")


def read_trace_bytes(path: Path, pre_read: PreRead | None = None) -> bytes:
    """The trace's JSON bytes (gunzipped when needed), from `pre_read` when the caller has them."""
    raw = pre_read.take() if pre_read is not None else None
    data: bytes = read_file_bytes(path) if raw is None else raw
    del raw
    if data[:2] == _GZIP_MAGIC:
        data = _gunzip(path, data)
        _check_format(path, bytes(data[:8]), "gzip data holding ")
    else:
        _check_format(path, data[:8])
        if len(data) > MAX_TRACE_JSON_BYTES:
            raise BadTraceError(
                f"{path}: {_size_text(len(data))} of JSON, above the {_size_text(MAX_TRACE_JSON_BYTES)} "
                "limit for one trace; profile fewer steps"
            )
    if not data or data.isspace():  # not strip(): that copies the whole trace
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
    from tracelake.ingest.json_repair import repair_json, repair_utf8, valid_utf8  # noqa: PLC0415 - numpy stays out of the read-ahead thread

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
    from tracelake.ingest.event_list import EventList, NotAnEventArray  # noqa: PLC0415 - see _decode_top_level
    from tracelake.ingest.metadata import decode_metadata  # noqa: PLC0415 - see _decode_top_level

    uncompressed_bytes = len(data)
    top, data, repaired = _decode_top_level(path, data)
    if "traceEvents" not in top:
        raise NotATraceError(
            f"{path}: JSON has no 'traceEvents' list; is this a torch.profiler Chrome trace?"
        )
    try:
        raw_events = EventList(memoryview(top.pop("traceEvents")))
    except NotAnEventArray:
        raise BadTraceError(f"{path}: 'traceEvents' is not a list") from None
    except (msgspec.DecodeError, RecursionError) as exc:  # the document decoded, so not expected
        raise BadTraceError(f"{path}: 'traceEvents' is not valid JSON ({exc}); is the file complete?") from None
    if not raw_events:
        raise BadTraceError(f"{path}: 'traceEvents' is empty; the profiler recorded nothing")
    metadata = decode_metadata(top)
    return TraceDocument(
        raw_events=raw_events,
        metadata=metadata.values,
        uncompressed_bytes=uncompressed_bytes,
        repaired=repaired + metadata.repaired,
        masked_keys=metadata.masked_keys,
    )
