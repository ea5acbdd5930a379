"""Freed memory goes back to the operating system between heavy steps (tracelake/memory.py)."""

from __future__ import annotations

import duckdb

from tracelake.memory import MemoryReleaser, _releasers, release_free_memory, resident_bytes

MB = 1 << 20


def _heavy_query(db: duckdb.DuckDBPyConnection) -> None:
    """A hash aggregate of a few hundred MB, freed when the query ends."""
    db.sql("select count(*) from (select distinct range % 2000003 as k, range::varchar as s "
           "from range(3000000))").fetchall()


def test_both_allocators_are_reached() -> None:
    # glibc's malloc_trim and the jemalloc DuckDB links in: if a DuckDB release renames its
    # jemalloc symbols, the purge silently stops and this fails
    assert len(_releasers()) == 2


def test_duckdb_query_memory_is_returned() -> None:
    db = duckdb.connect()
    db.sql("select 1").fetchall()
    before = resident_bytes()
    _heavy_query(db)
    after_query = resident_bytes()
    release_free_memory()
    released = resident_bytes()
    assert before is not None and after_query is not None and released is not None
    assert after_query - before > 100 * MB  # DuckDB keeps the freed query memory...
    assert released - before < 30 * MB  # ...until it is purged


def test_a_step_that_allocated_little_releases_nothing() -> None:
    db = duckdb.connect()
    _heavy_query(db)  # retained, not yet released
    releaser = MemoryReleaser()
    held = resident_bytes()
    db.sql("select 42").fetchall()
    releaser.step_done()  # grew by far less than the threshold: the retained memory stays
    assert held is not None and (resident_bytes() or 0) > held - 30 * MB
    release_free_memory()
