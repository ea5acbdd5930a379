"""Read a trace file (.json or .json.gz) into bytes and split off its event list."""

from __future__ import annotations

import gzip
import hashlib
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ingest.errors import BadTraceError, NotATraceError

TRACE_SUFFIXES = (".json", ".json.gz")
HASH_CHUNK_BYTES = 8 << 20


@dataclass(frozen=True)
class TraceDocument:
    """The top level of a Chrome-trace JSON file with the events left undecoded."""

    raw_events: list[msgspec.Raw]
    metadata: dict[str, Any]
    uncompressed_bytes: int


def is_trace_file(path: Path) -> bool:
    return path.is_file() and path.name.endswith(TRACE_SUFFIXES)


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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with _reading(path), path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def read_file_bytes(path: Path) -> bytes:
    with _reading(path):
        return path.read_bytes()


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


def read_trace_bytes(path: Path, pre_read: PreRead | None = None) -> bytes:
    """The trace's JSON bytes (gunzipped when needed), from `pre_read` when the caller has them."""
    raw = pre_read.take() if pre_read is not None else None
    data = read_file_bytes(path) if raw is None else raw
    del raw
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as exc:
            raise BadTraceError(
                f"{path}: gzip data is truncated or corrupt ({exc}); re-copy or re-export the trace"
            ) from None
    if not data.strip():
        raise BadTraceError(f"{path}: file is empty; expected a PyTorch profiler trace")
    return data


def parse_trace_document(path: Path, data: bytes) -> TraceDocument:
    """Validate the JSON and return the event list as raw slices plus the other top-level keys."""
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        raise NotATraceError(
            f"{path}: JSON top level is not an object; expected a Chrome trace with 'traceEvents'"
        ) from None
    except msgspec.DecodeError as exc:
        raise BadTraceError(f"{path}: not valid JSON ({exc}); is the file complete?") from None
    if "traceEvents" not in top:
        raise NotATraceError(
            f"{path}: JSON has no 'traceEvents' list; is this a torch.profiler Chrome trace?"
        )
    try:
        raw_events = msgspec.json.decode(top.pop("traceEvents"), type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise BadTraceError(f"{path}: 'traceEvents' is not a list") from None
    if not raw_events:
        raise BadTraceError(f"{path}: 'traceEvents' is empty; the profiler recorded nothing")
    metadata = {key: msgspec.json.decode(value) for key, value in top.items()}
    return TraceDocument(raw_events=raw_events, metadata=metadata, uncompressed_bytes=len(data))
