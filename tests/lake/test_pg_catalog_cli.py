"""`--catalog postgresql://...` through the CLI: a catalog that cannot be used is one line naming it
(never its password), exit 2, before anything is written; a password is never written down."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.lake.pg_server import PostgresServer, free_port

SMALL = TRACES / "torch_compile_triton" / "trace.json.gz"
EXIT_BAD_INPUT = 2


def _refused(result_stderr: str) -> str:
    lines = result_stderr.strip().splitlines()
    assert len(lines) == 1, result_stderr
    assert lines[0].startswith("tracelake: error: "), result_stderr
    assert "Traceback" not in result_stderr
    return lines[0]


@pytest.mark.parametrize("case", ["unreachable", "wrong-password", "no-password", "no-database"])
def test_a_catalog_that_cannot_be_used_is_one_line_and_nothing_is_written(
        postgres_server: PostgresServer, pg_catalog: str, tmp_path: Path, case: str) -> None:
    database = pg_catalog.rsplit("/", 1)[1]
    env = postgres_server.client_env()
    catalog = pg_catalog
    if case == "unreachable":  # a port no server listens on
        catalog = f"postgresql://tl@127.0.0.1:{free_port()}/{database}"
    elif case == "wrong-password":  # given in the URL: it must not be echoed back
        catalog = f"postgresql://tl:not-{postgres_server.password}@127.0.0.1:{postgres_server.port}/{database}"
    elif case == "no-password":
        env = {"PGPASSWORD": "", "PGPASSFILE": str(tmp_path / "no-pgpass")}
    else:
        catalog = postgres_server.url("no_such_database")
    folder = tmp_path / "wh"
    result = run_cli("ingest", str(SMALL), "--warehouse", str(folder), "--catalog", catalog, "--quiet", env=env)
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    line = _refused(result.stderr)
    expected = {"unreachable": "cannot reach the PostgreSQL catalog", "wrong-password": "refused the credentials",
                "no-password": "refused the credentials", "no-database": "does not exist"}[case]
    assert expected in line
    shown = catalog if case != "wrong-password" else postgres_server.url(database)
    assert shown in line  # the catalog named, without its password
    assert postgres_server.password not in line
    assert not folder.exists()  # no lake.json, no data files, not even the folder
    assert postgres_server.psql("select count(*) from pg_tables where tablename like 'ducklake%'",
                                database).strip() == "0"


def test_the_password_is_taken_from_the_url_and_never_written(postgres_server: PostgresServer, pg_catalog: str,
                                                             tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    database = pg_catalog.rsplit("/", 1)[1]
    no_password = {"PGPASSWORD": "", "PGPASSFILE": str(tmp_path / "no-pgpass")}
    with_password = postgres_server.url(database, with_password=True)
    made = run_cli("ingest", str(SMALL), "--warehouse", str(folder), "--catalog", with_password, "--quiet",
                   env=no_password)
    assert made.returncode == 0, made.stderr
    assert json.loads((folder / "lake.json").read_text())["catalog"] == pg_catalog
    written = [path for path in folder.rglob("*") if path.is_file() and postgres_server.password.encode() in path.read_bytes()]
    assert written == []
    # a reader logs in with PGPASSWORD; without any password it is one line, not a traceback
    read = run_cli("sql", "select count(*) as n from traces", "--warehouse", str(folder), "--format", "csv",
                   env=postgres_server.client_env())
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["n", "1"]
    refused = run_cli("sql", "select count(*) from traces", "--warehouse", str(folder), env=no_password)
    assert refused.returncode == EXIT_BAD_INPUT
    assert "refused the credentials" in _refused(refused.stderr)
