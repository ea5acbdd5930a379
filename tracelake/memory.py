"""Give memory that is already freed back to the operating system between heavy steps.

Both allocators in this process keep freed memory for reuse: glibc (Python objects, Arrow
buffers) and the jemalloc that DuckDB links in (query memory, purged only after about a second).
An ingest or an analysis runs a series of short, heavy queries, so without this the peak RSS
grows towards the sum of what the queries used instead of the largest of them (bench/analyze.py,
55 MB trace). Where either allocator is missing (another libc, a DuckDB build without jemalloc),
that part does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from functools import cache

_ALL_ARENAS_PURGE = b"arena.4096.purge"  # jemalloc mallctl; 4096 is MALLCTL_ARENAS_ALL
_ALL_ARENAS_DIRTY_PAGES = b"stats.arenas.4096.pdirty"
# Purging costs a few ms plus page faults when the memory is used again: only worth it once this
# much has been allocated since the last release. 55 MB trace, interleaved runs: releasing after
# 64 MB of growth cost ingest 0.08 s, after 96 MB 0.02 s; analyze peak 348 -> 328 MB either way.
RELEASE_MIN_GROWTH_BYTES = 96 << 20
# Also released once resident memory is this far above where the steps began and DuckDB's allocator
# holds at least this much freed memory (jemalloc dirty pages): the next step then starts lower. 55 MB
# trace, interleaved runs: peak RSS -19 MB (ingest) and -17 MB (analyze) for +0.045 s each.
RELEASE_HIGH_WATER_BYTES = 64 << 20
RELEASE_MIN_DIRTY_BYTES = 24 << 20
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@cache
def _releasers() -> tuple[Callable[[], object], ...]:
    releasers: list[Callable[[], object]] = []
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        trim.argtypes = [ctypes.c_size_t]
        releasers.append(lambda: trim(0))
    except (OSError, AttributeError):
        pass
    mallctl = _duckdb_mallctl()
    if mallctl is not None:
        releasers.append(lambda: mallctl(_ALL_ARENAS_PURGE, None, None, None, 0))
    return tuple(releasers)


def resident_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return None


@cache
def _duckdb_mallctl() -> Callable[..., int] | None:
    try:
        import _duckdb  # noqa: PLC0415 - the extension module that links jemalloc

        mallctl = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
    except (OSError, AttributeError, ImportError):
        return None
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return mallctl


def duckdb_free_bytes() -> int | None:
    """Memory DuckDB's jemalloc has freed but still holds (dirty pages of all arenas)."""
    mallctl = _duckdb_mallctl()
    if mallctl is None:
        return None
    epoch = ctypes.c_uint64(1)  # refreshes the statistics
    mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
    pages, size = ctypes.c_size_t(), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
    if mallctl(_ALL_ARENAS_DIRTY_PAGES, ctypes.byref(pages), ctypes.byref(size), None, 0) != 0:
        return None
    return pages.value * _PAGE_BYTES


def release_free_memory() -> None:
    for release in _releasers():
        release()


class MemoryReleaser:
    """release_free_memory() after a step, when resident memory grew enough since the last release,
    or when it is high and DuckDB holds enough freed memory to matter for the next step's peak."""

    def __init__(self) -> None:
        self._start = self._after_release = resident_bytes()

    def step_done(self) -> None:
        now = resident_bytes()
        if now is None or self._after_release is None or self._start is None:
            release_free_memory()
            return
        grown = now - self._after_release >= RELEASE_MIN_GROWTH_BYTES
        high = now - self._start >= RELEASE_HIGH_WATER_BYTES and (duckdb_free_bytes() or 0) >= RELEASE_MIN_DIRTY_BYTES
        if grown or high:
            release_free_memory()
            self._after_release = resident_bytes()
