"""`tracelake sql` is read-only: every statement kind that would write, attach, load, reconfigure or
reach the network is refused with one line and exit 2, the warehouse byte-identical; reads work.
Also the two layers on their own: the settings `lock_down` applies, and `check_query`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tests.cli.conftest import snapshot
from tests.conftest import run_cli
from tracelake.core.errors import TraceLakeError
from tracelake.sql_guard import ReadOnlyQueryError, check_query, lock_down

pytestmark = pytest.mark.usefixtures("classic_layout")  # its Parquet partitions and database file; tests/lake/test_lake_sql_guard.py: the lakehouse

# (id, statement, text the one stderr line must contain). Placeholders: {partition} is the
# trace's trace_files Parquet file (what testers overwrote), {out} a folder outside the warehouse.
REFUSED = [
    ("copy to the warehouse parquet", "copy (select * from traces limit 0) to '{partition}' (format parquet)",
     "COPY ... TO / FROM is refused; export a result with `tracelake sql QUERY --format csv > FILE`"),
    ("copy to elsewhere", "copy traces to '{out}/traces.csv'", "COPY ... TO / FROM is refused"),
    ("copy from", "copy kernels from '{out}/kernels.csv'", "COPY ... TO / FROM is refused"),
    ("attach", "attach '{out}/other.duckdb' as other", "ATTACH is refused"),
    ("attach in memory", "attach ':memory:' as scratch", "ATTACH is refused"),
    ("detach", "detach warehouse", "DETACH is refused"),
    ("install", "install httpfs", "INSTALL is refused"),
    ("force install", "force install httpfs", "INSTALL is refused"),
    ("load", "load httpfs", "LOAD is refused"),
    ("load a file", "load '{out}/evil.duckdb_extension'", "LOAD is refused"),
    ("set", "set threads = 1", "changing settings (SET / RESET / PRAGMA name = value / USE) is refused"),
    ("set unlock", "set lock_configuration = false", "changing settings"),
    ("set external access", "set enable_external_access = true", "changing settings"),
    ("set allowed directories", "set allowed_directories = ['/']", "changing settings"),
    ("reset", "reset memory_limit", "changing settings"),
    ("pragma setting", "pragma memory_limit = '1GB'", "changing settings"),
    ("set variable", "set variable x = 1", "changing settings"),
    ("use", "use memory", "changing settings"),
    ("pragma profiling", "pragma enable_profiling", "PRAGMA enable_profiling is refused"),
    ("import database", "import database '{out}'", "IMPORT DATABASE is refused"),
    ("create table", "create table copied as select * from traces", "CREATE is refused"),
    ("create temp view", "create temp view v as select 1",
     "CREATE is refused; name intermediate results with a WITH clause"),
    ("create macro", "create temp macro twice(x) as x * 2", "CREATE is refused"),
    ("create secret", "create persistent secret s (type s3, key_id 'k', secret 's')", "CREATE is refused"),
    ("drop", "drop view kernel_summary", "DROP is refused"),
    ("alter", "alter view kernel_summary rename to ks", "ALTER / COMMENT ON is refused"),
    ("insert", "insert into gpu_timeline select * from gpu_timeline", "INSERT is refused"),
    ("update", "update kernels set dur_us = 0", "UPDATE is refused"),
    ("delete", "delete from kernels", "DELETE / TRUNCATE is refused"),
    ("truncate", "truncate kernels", "DELETE / TRUNCATE is refused"),
    ("export database", "export database '{out}/export'", "EXPORT DATABASE is refused"),
    ("checkpoint", "checkpoint", "CHECKPOINT is refused"),
    ("force checkpoint", "force checkpoint", "CHECKPOINT is refused"),
    ("checkpoint table function", "select * from checkpoint()", "the table function checkpoint() is refused"),
    ("logging table function", "select * from enable_logging(storage = 'file', storage_path = '{partition}.log')",
     "the table function enable_logging() is refused"),
    ("call", "call pragma_table_info('kernels')",
     "CALL is refused; call a table function as SELECT * FROM name(...)"),
    ("query table function", "select * from query('select 1')", "the table function query() is refused"),
    ("explain analyze copy", "explain analyze copy (select 1) to '{partition}' (format parquet)",
     "EXPLAIN of anything but a SELECT is refused"),
    ("explain with options copy", "explain (format json) copy (select 1) to '{out}/x.csv'",
     "EXPLAIN of anything but a SELECT"),
    ("pivot without values", "pivot kernels on category using count(*)", "a PIVOT without an IN list creates a type"),
    ("transaction", "begin transaction", "BEGIN / COMMIT / ROLLBACK is refused"),
    ("vacuum", "vacuum", "VACUUM / ANALYZE is refused"),
    ("update extensions", "update extensions", "`update extensions` is refused"),
    ("read http", "select * from read_csv('http://example.com/kernels.csv')",
     "reading http://example.com/kernels.csv is refused; tracelake sql reaches no network"),
    ("read https", "select * from read_csv('https://example.com/kernels.csv')", "reaches no network"),
    ("read s3", "select * from read_parquet('s3://bucket/kernels.parquet')", "reaches no network"),
    ("read hf", "select * from read_parquet('hf://datasets/x/y/kernels.parquet')", "reaches no network"),
    ("read a file outside", "select * from read_text('/etc/hostname')",
     "opening /etc/hostname is refused; tracelake sql opens files only under"),
    ("read the warehouse's other files", "select * from read_text('{wh}/dbt/plan.json')", "opens files only under"),
    ("dot-dot out of the parquet folder", "select * from read_text('{wh}/parquet/../dbt/plan.json')",
     "opens files only under"),
    # DuckDB always lets its own database file be read: its free blocks hold deleted rows' bytes
    ("the database file", "select size from read_blob('{wh}/warehouse.duckdb')", "opens files only under"),
    ("the database file through dot-dot", "select content from read_blob('{wh}/parquet/../warehouse.duckdb')",
     "warehouse.duckdb); tracelake sql opens files only under"),
    ("the database file through dot and dot-dot", "select * from read_blob('{wh}/parquet/./../warehouse.duckdb')",
     "opens files only under"),
    ("the database file through a doubled slash", "select * from read_blob('{wh}/parquet//../warehouse.duckdb')",
     "opens files only under"),
    ("the database file through a glob", "select filename from read_blob('{wh}/parquet/*/../../warehouse.duckdb')",
     "opens files only under"),
    ("the database file in a list", "select * from read_blob(['{partition}', '{wh}/parquet/../warehouse.duckdb'])",
     "opens files only under"),
    ("the database file as a table", "select * from '{wh}/parquet/../warehouse.duckdb'", "opens files only under"),
    ("the database WAL", "select * from read_blob('{wh}/warehouse.duckdb.wal')", "opens files only under"),
    ("a computed path", "select * from read_blob('{wh}/parquet/' || '../warehouse.duckdb')",
     "a computed file path in read_blob() is refused"),
    ("write hidden after a select", "select count(*) from traces; copy (select 1) to '{partition}' (format parquet)",
     "COPY ... TO / FROM is refused"),
    ("delete hidden after a select", "select 1;\n-- then\ndelete from kernels", "DELETE / TRUNCATE is refused"),
]


@pytest.fixture(scope="module")
def partition(small_warehouse: Path) -> Path:
    (found,) = (small_warehouse / "parquet" / "trace_files").glob("trace_id=*/part-0.parquet")
    return found


def _run_sql(warehouse: Path, query: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("sql", query, "--warehouse", str(warehouse), *args)


def _refusal_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracelake: error: ")
    return lines[0]


@pytest.mark.parametrize(("statement", "expected"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_refused_statement_leaves_the_warehouse_as_it_was(small_warehouse: Path, partition: Path, tmp_path: Path,
                                                          statement: str, expected: str) -> None:
    query = statement.format(wh=small_warehouse, partition=partition, out=tmp_path)
    before = snapshot(small_warehouse)
    line = _refusal_line(_run_sql(small_warehouse, query))
    assert line.startswith("tracelake: error: sql is read-only: "), line
    assert expected in line, line
    assert snapshot(small_warehouse) == before
    assert list(tmp_path.iterdir()) == []  # nothing written outside the warehouse either


def test_a_link_inside_the_parquet_folder_pointing_out_is_refused(small_warehouse: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("not for tracelake sql")
    links = [small_warehouse / "parquet" / "escape", small_warehouse / "parquet" / "up.parquet"]
    links[0].symlink_to(tmp_path, target_is_directory=True)
    links[1].symlink_to(small_warehouse / "warehouse.duckdb")
    try:
        for query in [f"select * from read_text('{links[0]}/secret.txt')", f"select * from read_blob('{links[1]}')",
                      f"select filename from read_blob('{small_warehouse}/parquet/*/secret.txt')",
                      f"select filename from read_blob('{small_warehouse}/parquet/*.parquet')"]:
            line = _refusal_line(_run_sql(small_warehouse, query))
            assert "tracelake sql opens files only under" in line, (query, line)
    finally:
        for link in links:
            link.unlink()


def test_python_objects_are_not_tables(small_warehouse: Path) -> None:
    """DuckDB's replacement scans would answer `os` with the CLI's `os` module."""
    before = snapshot(small_warehouse)
    line = _refusal_line(_run_sql(small_warehouse, "select * from os"))
    assert "Table with name os does not exist" in line, line
    assert snapshot(small_warehouse) == before


# ---- reads ------------------------------------------------------------------------------------


def _rows(warehouse: Path, query: str) -> list[dict]:
    result = _run_sql(warehouse, query, "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_reads_work_and_change_nothing(small_warehouse: Path, partition: Path) -> None:
    before = snapshot(small_warehouse)
    trace_id = partition.parent.name.removeprefix("trace_id=")
    assert _rows(small_warehouse, "select trace_id from traces") == [{"trace_id": trace_id}]
    timeline = _rows(small_warehouse, "select trace_id, total_time_ms, idle_time_percent from gpu_timeline")
    assert [row["trace_id"] for row in timeline] == [trace_id]
    joined = _rows(small_warehouse, "select t.device_name, g.busy_time_ms, count(k.trace_id) as kernels "
                                    "from gpu_timeline g join traces t using (trace_id) "
                                    "join kernels k using (trace_id) group by all")
    assert len(joined) == 1 and joined[0]["kernels"] > 0
    assert any(row["column_name"] == "trace_id" for row in _rows(small_warehouse, "describe kernels"))
    assert any(row["name"] == "gpu_timeline" for row in _rows(small_warehouse, "show tables"))
    assert {row["column_name"] for row in _rows(small_warehouse, "summarize traces")} >= {"trace_id", "file_name"}
    assert any(row["name"] == "trace_id" for row in _rows(small_warehouse, "pragma table_info('kernels')"))
    assert _rows(small_warehouse, "explain select count(*) from kernels")
    assert _rows(small_warehouse, "explain analyze select count(*) from kernels")
    assert _rows(small_warehouse, "with k as (select * from kernels) select count(*) as n from k")[0]["n"] > 0
    assert _rows(small_warehouse, "select 1 as a; select 2 as b") == [{"b": 2}]  # the last statement's result
    # the raw Parquet of the warehouse itself stays readable by path
    direct = _rows(small_warehouse, f"select count(*) as n from read_parquet('{partition}')")
    assert direct == [{"n": 1}]
    assert snapshot(small_warehouse) == before


def test_output_formats_and_traces_command(small_warehouse: Path) -> None:
    csv = _run_sql(small_warehouse, "select trace_id, event_count from traces", "--format", "csv")
    assert csv.returncode == 0, csv.stderr
    assert csv.stdout.splitlines()[0] == "trace_id,event_count"
    table = _run_sql(small_warehouse, "select count(*) as n from kernels")
    assert table.returncode == 0 and "(1 row)" in table.stdout
    listed = run_cli("traces", "--warehouse", str(small_warehouse), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 1


def test_empty_query_is_one_line(small_warehouse: Path) -> None:
    assert "has no SQL statement" in _refusal_line(_run_sql(small_warehouse, "  ; -- nothing"))


# ---- the two layers on their own ---------------------------------------------------------------


@pytest.fixture
def locked(small_warehouse: Path):
    con = duckdb.connect(str(small_warehouse / "warehouse.duckdb"), read_only=True)
    lock_down(con, small_warehouse)
    yield con
    con.close()


def test_lock_down_settings(locked: duckdb.DuckDBPyConnection, small_warehouse: Path) -> None:
    settings = dict(locked.execute("select name, value from duckdb_settings()").fetchall())
    assert settings["enable_external_access"] == "false"
    assert settings["lock_configuration"] == "true"
    assert settings["autoload_known_extensions"] == "false"
    assert settings["autoinstall_known_extensions"] == "false"
    assert settings["python_enable_replacements"] == "false"
    assert f"{small_warehouse}/parquet/" in settings["allowed_directories"]
    assert not settings["temp_directory"].startswith(str(small_warehouse))


def test_lock_down_twice_and_on_a_second_connection(locked: duckdb.DuckDBPyConnection, small_warehouse: Path) -> None:
    lock_down(locked, small_warehouse)
    with duckdb.connect(str(small_warehouse / "warehouse.duckdb"), read_only=True) as second:  # the same instance
        lock_down(second, small_warehouse)
        assert second.execute("select count(*) from traces").fetchone() == (1,)


def test_settings_alone_stop_what_a_select_could_do(locked: duckdb.DuckDBPyConnection, small_warehouse: Path,
                                                    partition: Path) -> None:
    """Without check_query: the locked configuration refuses reconfiguring, logging to a file,
    other files, the network and extensions; reads of the warehouse still work."""
    before = snapshot(small_warehouse)
    assert locked.execute("select count(*) from gpu_timeline").fetchone() == (1,)
    for statement in ["set enable_external_access = true", "set lock_configuration = false", "reset threads"]:
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked|Cannot enable external"):
            locked.execute(statement)
    # DuckDB 1.5 lets these write a file inside the allowed folder; check_query refuses them by name
    for name, statement in [("enable_logging", f"select * from enable_logging(storage = 'file', storage_path = '{partition}.log')"),
                            ("enable_profiling", f"select * from enable_profiling(save_location = '{partition}.json')")]:
        with pytest.raises(ReadOnlyQueryError, match=rf"{name}\(\) is refused"):
            check_query(locked, statement)
    for statement in ["select * from read_text('/etc/hostname')", "select * from read_csv('https://example.com/a.csv')",
                      "install httpfs", "load httpfs", f"attach '{small_warehouse}/dbt/x.duckdb'"]:
        with pytest.raises(duckdb.PermissionException):
            locked.execute(statement)
    arrow_table = pa.table({"a": [1]})  # noqa: F841 - what a replacement scan would find
    with pytest.raises(duckdb.CatalogException):
        locked.execute("select * from arrow_table")
    assert snapshot(small_warehouse) == before


def test_the_settings_would_let_copy_into_the_parquet_folder_so_the_check_refuses_it(
        locked: duckdb.DuckDBPyConnection, partition: Path) -> None:
    """The one folder reads need is writable to DuckDB too: only the statement check stops COPY."""
    with pytest.raises(ReadOnlyQueryError, match="COPY"):
        check_query(locked, f"copy (select 1) to '{partition}' (format parquet)")
    with pytest.raises(ReadOnlyQueryError, match="table function checkpoint"):
        check_query(locked, "with c as (from checkpoint()) select 1")
    check_query(locked, "select * from kernels")
    check_query(locked, "/* why */ explain (format json) select * from kernels")


def test_spilling_stays_outside_the_warehouse(small_warehouse: Path) -> None:
    con = duckdb.connect(str(small_warehouse / "warehouse.duckdb"), read_only=True)
    try:
        con.execute("set memory_limit = '32MB'")
        con.execute("set threads = 1")
        lock_down(con, small_warehouse)
        before = snapshot(small_warehouse)
        spill_folder = Path(con.execute("select current_setting('temp_directory')").fetchone()[0])
        spilled = con.execute("select max(h) from (select md5(range::varchar) as h from range(2000000) order by h)")
        assert spilled.fetchone()[0]
        assert spill_folder.is_dir()  # it did spill, there
        assert not (small_warehouse / "warehouse.duckdb.tmp").exists()
        assert snapshot(small_warehouse) == before
    finally:
        con.close()


def test_refusal_is_a_tracelake_error() -> None:
    assert issubclass(ReadOnlyQueryError, TraceLakeError)
