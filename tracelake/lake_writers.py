"""Many writers on one lakehouse warehouse: what a PostgreSQL catalog needs that a local one does not.

A local catalog (SQLite in the warehouse folder) has one host, so writers take turns on the fcntl
lock `<warehouse>/.lock` as the classic layout's do. Writers on many machines share only the
PostgreSQL server (fcntl locks are not honoured reliably on shared file systems), so with a
PostgreSQL catalog no fcntl lock is taken and DuckLake's transactions keep concurrent commits
apart:

- Writers of different traces commit at once: DuckLake merges commits that touch different rows
  (inserts into the same table, deletes of rows no one else deleted), one snapshot each.
- A commit DuckLake refuses as a conflict (two writers creating the first tables of an empty lake,
  deleting the same rows, replacing the same view) is rolled back whole; the writer runs its
  transaction again on the new snapshot (`retry_on_conflict`), a bounded number of times.
- Two writers of the same trace would both insert it (inserts never conflict), so a writer claims
  its traces first: PostgreSQL advisory locks, held until its commit ends and released by the
  server when the writer dies. The second writer waits, then finds the trace committed.
- Creating the DuckLake catalog is not safe to run twice at once (both create its PostgreSQL
  tables), so it runs under an advisory lock of its own.

Before any work starts, the catalog is reached once (`check_reachable`): a wrong host or port,
wrong credentials or a missing database is one line naming the catalog (never its password).
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import duckdb

from tracelake.core.errors import WarehouseError
from tracelake.core.sql_text import sql_literal
from tracelake.crashpoints import crash_point
from tracelake.lake_catalog import LOCAL_CATALOG, LakeLayout, _without_password
from tracelake.lake_extensions import extension_directory
from tracelake.sql_guard import NO_SECRET_DIRECTORY
from tracelake.writer_lock import WRITER_WAIT_SECONDS, _writer_wait_seconds

T = TypeVar("T")
DuckDBConfig = dict[str, str | bool | int | float | list[str]]  # duckdb.connect(config=...)

# A commit refused as a conflict is run again this many times in all, waiting a random
# 0.05-0.4 s (growing with each try) so that writers that collided do not collide again in step.
COMMIT_TRIES = 8
RETRY_WAIT_SECONDS = 0.05
CONNECT_TIMEOUT_SECONDS = 10  # libpq waits forever for a host that drops packets
# pg_advisory_xact_lock(int4, int4) keys: (class, number)
CREATE_LOCK_KEY = (0x54524C4B, 1)  # "TRLK": creating the catalog
CLAIM_CLASS = 0x54524C43  # "TRLC": claims on traces, one lock per bucket of trace ids
# A trace is claimed through its bucket (trace id mod CLAIM_BUCKETS): PostgreSQL's lock table holds
# max_locks_per_transaction (64) x max_connections (100) locks by default, so a batch of 10,000
# traces takes at most this many. Writers of few traces rarely share a bucket (then one waits
# for the other's commit); a batch of thousands holds most buckets, and others wait for its commit.
CLAIM_BUCKETS = 1024
_AUTH_FAILED = re.compile(r"password authentication failed|no password supplied|authentication failed|"
                          r"role \"[^\"]*\" does not exist|pg_hba\.conf", re.IGNORECASE)
_NO_DATABASE = re.compile(r'database "([^"]*)" does not exist', re.IGNORECASE)
_UNREACHABLE = re.compile(r"connection refused|could not translate host name|timeout expired|no route to host|"
                          r"network is unreachable|could not connect|server closed the connection", re.IGNORECASE)


def is_postgres(layout: LakeLayout) -> bool:
    return layout.catalog != LOCAL_CATALOG


def shares_fcntl_lock(layout: LakeLayout) -> bool:
    """Whether writers of this lake take turns on `<warehouse>/.lock` (a local catalog's do)."""
    return not is_postgres(layout)


def secrets_config(layout: LakeLayout) -> DuckDBConfig:
    """DuckDB's secret settings for a lake connection, fixed before the attach uses them.

    The postgres extension reads the persistent secret store on ATTACH and fails when persistent
    secrets are off, so for a PostgreSQL catalog they stay on with the store pointed at a folder
    that does not exist: no secret stored for the user's own DuckDB is read, none is written (the
    read-only guard refuses CREATE SECRET, and tracelake/sql_guard.py knows this folder)."""
    if not is_postgres(layout):
        return {"allow_persistent_secrets": False}
    return {"allow_persistent_secrets": True, "secret_directory": NO_SECRET_DIRECTORY}


def scrubbed(text: str, *urls: str | None) -> str:
    """`text` with each URL's password taken out (DuckDB's errors quote the URL they were given)."""
    for url in urls:
        if not url:
            continue
        text = text.replace(url, _without_password(url))
        password = urlsplit(url).password
        if password:
            text = text.replace(password, "***")
    return text


def _with_connect_timeout(url: str) -> str:
    parts = urlsplit(url)
    if any(key == "connect_timeout" for key, _ in parse_qsl(parts.query)):
        return url
    query = "&".join(filter(None, [parts.query, f"connect_timeout={CONNECT_TIMEOUT_SECONDS}"]))
    return urlunsplit(parts._replace(query=query))


def _postgres_connection(url: str, layout: LakeLayout) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the catalog's PostgreSQL database attached as `pg` (one server
    connection per DuckDB transaction, which is what holds an advisory lock)."""
    config: DuckDBConfig = {"extension_directory": extension_directory("postgres_scanner").as_posix(),
                            "autoinstall_known_extensions": False, "autoload_known_extensions": True,
                            **secrets_config(layout)}
    con = duckdb.connect(config=config)
    try:
        con.execute(f"attach {sql_literal(_with_connect_timeout(url))} as pg (type postgres)")
    except BaseException:
        con.close()
        raise
    return con


def catalog_problem(url: str, exc: BaseException) -> str:
    """One line saying why the PostgreSQL catalog at `url` cannot be used, without its password."""
    safe = _without_password(url)
    detail = scrubbed(str(exc), url, _with_connect_timeout(url))
    reason = detail.split('": ', 1)[-1] if "Unable to connect to Postgres" in detail else detail
    reason = " ".join(reason.replace("FATAL:", "").split())
    missing = _NO_DATABASE.search(reason)
    if missing:
        return (f"the PostgreSQL catalog {safe} cannot be used: database {missing.group(1)!r} does not exist "
                f"on that server; create it (createdb {missing.group(1)}) or name another")
    if _AUTH_FAILED.search(reason):
        return (f"the PostgreSQL catalog {safe} refused the credentials ({reason}); give the password in the URL, "
                "$PGPASSWORD or ~/.pgpass, and check the user name")
    if _UNREACHABLE.search(reason):
        return (f"cannot reach the PostgreSQL catalog {safe} ({reason}); check that the server runs there "
                "and that the host and port are right")
    return f"cannot use the PostgreSQL catalog {safe} ({reason})"


def check_reachable(url: str, layout: LakeLayout) -> None:
    """Connect to the PostgreSQL catalog once; WarehouseError (one line) when it cannot be used."""
    try:
        with _postgres_connection(url, layout) as con:
            con.execute("select * from postgres_query('pg', 'select 1')").fetchall()
    except duckdb.Error as exc:
        raise WarehouseError(catalog_problem(url, exc)) from None


def is_commit_conflict(exc: BaseException) -> bool:
    """DuckLake's refusal of a commit that clashes with one committed since the transaction began:
    `TransactionException: Failed to commit DuckLake transaction. Transaction conflict - ...`."""
    return isinstance(exc, duckdb.TransactionException) and "conflict" in str(exc).lower()


def retry_on_conflict(attempt: Callable[[], T], what: str, tries: int = COMMIT_TRIES) -> T:
    """`attempt()` (one whole transaction, opened and committed inside it), run again when DuckLake
    refuses its commit as a conflict; WarehouseError after `tries` refusals."""
    for tried in range(1, tries + 1):
        try:
            return attempt()
        except duckdb.Error as exc:
            if not is_commit_conflict(exc):
                raise
            conflict = str(exc).split("Transaction conflict - ", 1)[-1].splitlines()[0]
            if tried == tries:
                raise WarehouseError(f"{what}: {tries} commits in a row clashed with other writers' ({conflict}); "
                                     "re-run when fewer writers are at work") from None
            print(f"tracelake: note: {what}: another writer committed first ({conflict}); committing again "
                  f"(try {tried + 1} of {tries})", file=sys.stderr, flush=True)
        time.sleep(random.uniform(RETRY_WAIT_SECONDS, RETRY_WAIT_SECONDS * 2 ** min(tried, 3)))
    raise AssertionError("unreachable")


def committed_among(con: duckdb.DuckDBPyConnection, table: str, trace_ids: list[str]) -> set[str]:
    """Which of `trace_ids` the table of committed traces holds in `con`'s snapshot (another writer
    may have committed one since this writer looked)."""
    if not trace_ids:
        return set()
    listed = ", ".join(sql_literal(trace_id) for trace_id in trace_ids)
    try:
        rows = con.execute(f"select distinct trace_id from {table} where trace_id in ({listed})").fetchall()
    except duckdb.CatalogException:  # no trace committed yet: the table is made with the first
        return set()
    return {str(row[0]) for row in rows}


def _claim_bucket(trace_id: str) -> int:
    return int(trace_id[:16], 16) % CLAIM_BUCKETS


@contextmanager
def _advisory_locks(url: str, layout: LakeLayout, keys: list[str], waiting_for: str) -> Iterator[None]:
    """Hold PostgreSQL advisory locks (`keys`: SQL argument lists) from the block's start to its end;
    the server drops them if this process dies."""
    wait = _writer_wait_seconds()
    try:
        con = _postgres_connection(url, layout)
    except duckdb.Error as exc:
        raise WarehouseError(catalog_problem(url, exc)) from None
    try:
        con.begin()
        con.execute(f"call postgres_execute('pg', 'set local lock_timeout = {int(wait * 1000)}')")
        for key in keys:
            try:
                con.execute(f"call postgres_execute('pg', 'select pg_advisory_xact_lock({key})')")
            except duckdb.Error as exc:
                if "lock timeout" in str(exc).lower():
                    raise WarehouseError(f"{waiting_for} has been held by another writer for over {wait:g} s "
                                         f"(a writer of the same catalog, {_without_password(url)}); let it finish "
                                         f"or stop it, then re-run") from None
                raise WarehouseError(catalog_problem(url, exc)) from None
        yield
    finally:
        con.close()  # ends the server's transaction, and with it the locks


@contextmanager
def claiming(url: str | None, layout: LakeLayout, trace_ids: list[str]) -> Iterator[None]:
    """With a PostgreSQL catalog: no other writer commits any of `trace_ids` until the block ends
    (it waits); a no-op for a local catalog, whose writers take turns on the fcntl lock."""
    if url is None or not is_postgres(layout) or not trace_ids:
        yield
        return
    buckets = sorted({_claim_bucket(trace_id) for trace_id in trace_ids})  # one order: no deadlock
    keys = [f"{CLAIM_CLASS}, {bucket}" for bucket in buckets]
    with _advisory_locks(url, layout, keys, f"the commit of {len(trace_ids)} trace(s)"):
        crash_point("lake-claimed")
        yield


@contextmanager
def creating(url: str | None, layout: LakeLayout) -> Iterator[None]:
    """With a PostgreSQL catalog: the only writer creating the catalog's tables until the block ends."""
    if url is None or not is_postgres(layout):
        yield
        return
    with _advisory_locks(url, layout, [f"{CREATE_LOCK_KEY[0]}, {CREATE_LOCK_KEY[1]}"], "creating the catalog"):
        yield


__all__ = ["COMMIT_TRIES", "WRITER_WAIT_SECONDS", "catalog_problem", "check_reachable", "claiming", "committed_among",
           "creating",
           "is_commit_conflict", "is_postgres", "retry_on_conflict", "scrubbed", "secrets_config", "shares_fcntl_lock"]
