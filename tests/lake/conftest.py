"""Fixtures of the lakehouse tests: a real PostgreSQL server for the catalog (tests/lake/pg_server.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.lake.pg_server import PostgresServer, running_server

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session. Fails (never skips) when PostgreSQL is not installed:
    CI installs it (`make postgres`)."""
    try:
        with running_server() as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def pg_catalog(postgres_server: PostgresServer) -> str:
    """A new, empty database on the session's server: its catalog URL (without the password; the
    CLI logs in with `postgres_server.client_env()`)."""
    return postgres_server.create_database(f"lake_{next(_databases)}")
