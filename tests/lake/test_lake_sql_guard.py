"""`tracelake sql` on a lakehouse warehouse (the default layout) is read-only as on the classic one:
every generic refusal of tests/cli/test_sql_guard.py holds, with a lake data file where that module
names a Parquet partition; the catalog (warehouse.sqlite), lake.json and the staging folder cannot
be read, attached or written; the data files can be read. The warehouse stays byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import snapshot
from tests.cli.test_sql_guard import REFUSED, _refusal_line, _run_sql
from tests.conftest import TRACES, run_cli

SMALL = TRACES / "torch_compile_triton" / "trace.json.gz"
CLASSIC_ONLY = ("{wh}/parquet", "{wh}/dbt", "warehouse.duckdb")  # paths only the classic layout has
LAKE_REFUSED = [
    ("the catalog file", "select size from read_blob('{wh}/warehouse.sqlite')", "opens files only under"),
    ("the catalog through dot-dot", "select size from read_blob('{wh}/lake/../warehouse.sqlite')",
     "opens files only under"),
    ("the catalog through a glob", "select filename from read_blob('{wh}/lake/*/../../warehouse.sqlite')",
     "opens files only under"),
    ("the catalog as sqlite", "select * from sqlite_scan('{wh}/warehouse.sqlite', 'ducklake_snapshot')",
     "refused"),
    ("the layout file", "select * from read_json('{wh}/lake.json')", "opens files only under"),
    ("attach the catalog", "attach 'ducklake:sqlite:{wh}/warehouse.sqlite' as other", "ATTACH is refused"),
    ("copy into the data path", "copy (select 1) to '{wh}/lake/x.parquet' (format parquet)",
     "COPY ... TO / FROM is refused"),
]
CASES = [case for case in REFUSED if not any(part in case[1] for part in CLASSIC_ONLY)] + LAKE_REFUSED


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lake_guard") / "wh"
    done = run_cli("ingest", str(SMALL), "--warehouse", str(folder), "--quiet")
    assert done.returncode == 0, done.stderr
    assert (folder / "lake.json").is_file()
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0  # a first read registers its readers' file
    return folder


@pytest.fixture(scope="module")
def data_file(lake: Path) -> Path:
    listed = run_cli("files", "raw.trace_files", "--warehouse", str(lake))
    assert listed.returncode == 0, listed.stderr
    return Path(listed.stdout.split()[0])


@pytest.mark.parametrize(("statement", "expected"), [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_refused_statement_leaves_the_lakehouse_as_it_was(lake: Path, data_file: Path, tmp_path: Path,
                                                          statement: str, expected: str) -> None:
    query = statement.format(wh=lake, partition=data_file, out=tmp_path)
    before = snapshot(lake)
    line = _refusal_line(_run_sql(lake, query))
    assert line.startswith("tracelake: error: sql is read-only: "), line
    assert expected in line, line
    assert snapshot(lake) == before
    assert list(tmp_path.iterdir()) == []


def test_the_data_files_can_be_read(lake: Path, data_file: Path) -> None:
    rows = run_cli("sql", f"select trace_id from read_parquet('{data_file}')", "--warehouse", str(lake),
                   "--format", "json")
    assert rows.returncode == 0, rows.stderr
    listed = run_cli("sql", "select trace_id from traces", "--warehouse", str(lake), "--format", "json")
    assert json.loads(rows.stdout) == json.loads(listed.stdout)
    # a link inside the data path that points out of it is no way around the guard
    link = data_file.parent / "escape.parquet"
    try:
        link.symlink_to(lake / "warehouse.sqlite")
        line = _refusal_line(_run_sql(lake, f"select * from read_blob('{link}')"))
        assert "opens files only under" in line or "refused" in line, line
    finally:
        link.unlink(missing_ok=True)
