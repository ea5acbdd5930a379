"""The lakehouse warehouse (tracelake/lakehouse.py) against the classic one, on the real traces: the
same rows in every public relation, every table readable from its files by pyarrow and Polars, one
snapshot per commit, old snapshots readable, rm / tag / vacuum, and the extensions loaded offline."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import TRACES
from tracelake.ingestion import ingest_paths
from tracelake.lakehouse import LakeWarehouse, open_warehouse
from tracelake.warehouse import Warehouse

BERT_H100 = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
QWEN_H100 = TRACES / "h100" / "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
# Columns that differ between two ingests of the same file: when and how fast it was ingested or
# modelled (every TIMESTAMP column: trace times are microsecond numbers), and an untagged run's
# label, which is its ingest time (and the trace label that carries it).
PER_INGEST_COLUMNS = {"ingest_seconds", "run_label", "trace_label"}
PER_INGEST_TYPES = {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE"}


def tracelake(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=900)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> LakeWarehouse:
    """Every trace of tests/data/traces, as the session's classic `warehouse` holds them."""
    wh = LakeWarehouse(tmp_path_factory.mktemp("lake"), "local")
    report = ingest_paths([TRACES], wh, tags={"suite": "tests"}, jobs=2)
    assert not report.failed, report.failed
    return wh


def _public_relations(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    rows = con.execute("select table_name, table_type from information_schema.tables "
                       "where table_catalog = current_database() and table_schema = 'main'").fetchall()
    return dict(rows)


def _rows(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple[object, ...]]:
    """The rows of `relation` minus per-ingest columns, sorted by their text with floats to 6
    significant digits (compared with a tolerance after: `_same_rows`)."""
    columns = [row[0] for row in con.execute(f'describe "{relation}"').fetchall()
               if row[0] not in PER_INGEST_COLUMNS and row[1] not in PER_INGEST_TYPES]
    if not columns:
        return []
    listed = ", ".join(f'"{c}"' for c in columns)
    rows = con.execute(f'select {listed} from "{relation}"').fetchall()
    return sorted(rows, key=lambda row: repr(tuple(f"{v:.6g}" if isinstance(v, float) else v for v in row)))


def _same_rows(left: list[tuple[object, ...]], right: list[tuple[object, ...]]) -> bool:
    """Equal, floats within 1e-9 relative: DuckDB's parallel sums and means differ in the last bits
    from run to run (0.27839261805925470 vs ...64), on either layout."""
    def same(a: object, b: object) -> bool:
        if isinstance(a, float) and isinstance(b, float):
            return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
        return a == b
    return len(left) == len(right) and all(len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
                                           for a, b in zip(left, right))


def _assert_same_public_rows(lake: LakeWarehouse, classic: Warehouse) -> None:
    with lake.connect_read_only() as lake_con, classic.connect_read_only() as classic_con:
        lake_relations, classic_relations = _public_relations(lake_con), _public_relations(classic_con)
        # the classic warehouse of the session also holds analyses other tests ran; the marts are the plan's
        missing = set(lake_relations) - set(classic_relations)
        assert not missing
        compared = 0
        for relation in sorted(lake_relations):
            lake_rows = _rows(lake_con, relation)
            assert _same_rows(lake_rows, _rows(classic_con, relation)), relation
            compared += bool(lake_rows)
    assert compared > 60  # the marts hold rows: a comparison of empty tables would prove nothing
    assert len(lake.trace_ids()) == len(classic.trace_ids()) >= 12


def test_every_public_relation_has_the_classic_warehouses_rows(lake: LakeWarehouse, warehouse: Warehouse) -> None:
    _assert_same_public_rows(lake, warehouse)


def test_a_classic_warehouse_migrates_whole_and_is_only_read(warehouse: Warehouse, tmp_path: Path) -> None:
    warehouse.connect_read_only().close()  # a first read registers the readers' file: not migrate's doing
    before = {p: p.stat().st_mtime_ns for p in warehouse.root.rglob("*") if p.is_file()}
    done = tracelake("migrate", "--warehouse", str(warehouse.root), "--to", str(tmp_path / "wh"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"migrated {len(warehouse.trace_ids())} trace(s)"), done.stdout
    migrated = open_warehouse(tmp_path / "wh")
    assert isinstance(migrated, LakeWarehouse)
    _assert_same_public_rows(migrated, warehouse)
    assert {p: p.stat().st_mtime_ns for p in warehouse.root.rglob("*") if p.is_file()} == before
    again = tracelake("migrate", "--warehouse", str(warehouse.root), "--to", str(tmp_path / "wh"))
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert "not an empty folder" in again.stderr
    of_a_lake = tracelake("migrate", "--warehouse", str(tmp_path / "wh"), "--to", str(tmp_path / "wh2"))
    assert of_a_lake.returncode == 2 and "is a lakehouse warehouse already" in of_a_lake.stderr, of_a_lake.stderr
    assert not (tmp_path / "wh2").exists()


def _files_read_by(reader: str, paths: list[str], schema: pa.Schema) -> pa.Table:
    if not paths:
        return schema.empty_table()
    if reader == "polars":
        return pl.read_parquet(paths).to_arrow()
    return pq.read_table(paths)


@pytest.mark.parametrize("reader", ["pyarrow", "polars"])
def test_the_files_of_every_table_hold_what_sql_reads(lake: LakeWarehouse, reader: str) -> None:
    with lake.connect_read_only() as con:
        tables = [(s, t) for s, t in con.execute(
            "select table_schema, table_name from information_schema.tables where table_catalog = current_database() "
            "and table_type = 'BASE TABLE' and table_schema in ('main', 'raw') order by all").fetchall()]
    assert len(tables) >= 30  # the raw tables, the seeds and every table-materialized mart
    for schema, table in tables:
        name = table if schema == "main" else f"{schema}.{table}"
        printed = tracelake("files", name, "--warehouse", str(lake.root))
        assert printed.returncode == 0, printed.stderr
        paths = printed.stdout.split()
        assert all(Path(p).is_file() and Path(p).is_relative_to(lake.data_path) for p in paths)
        with lake.connect_read_only() as con:
            expected = con.execute(f'select * from "{schema}"."{table}"').to_arrow_table()
            read = _files_read_by(reader, paths, expected.schema)
            assert read.num_rows == expected.num_rows, name
            probe = duckdb.connect()
            probe.register("from_files", read)
            probe.register("from_sql", expected)
            columns = ", ".join(f'"{c}"' for c in expected.column_names)
            differing = probe.execute(f"select count(*) from ((select {columns} from from_files except all "
                                      f"select {columns} from from_sql) union all (select {columns} from from_sql "
                                      f"except all select {columns} from from_files))").fetchone()
            assert differing == (0,), name


def _snapshots(wh: LakeWarehouse) -> list[int]:
    return [snapshot for snapshot, _ in wh.snapshots()]


def test_each_write_is_one_snapshot_and_old_ones_stay_readable(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    first = tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--catalog", "local", "--quiet")
    assert first.returncode == 0, first.stderr
    wh = open_warehouse(root)
    assert isinstance(wh, LakeWarehouse) and json.loads((root / "lake.json").read_text())["catalog"] == "local"
    after_first = _snapshots(wh)
    second = tracelake("ingest", str(BERT_MI300), "--warehouse", str(root), "--quiet")
    assert second.returncode == 0, second.stderr
    after_second = _snapshots(wh)
    assert len(after_second) == len(after_first) + 1  # the trace's raw rows, marts and ledger: one commit
    old = tracelake("sql", "select count(distinct trace_id) from kernels", "--at", str(after_first[-1]),
                    "--warehouse", str(root), "--format", "json")
    new = tracelake("sql", "select count(distinct trace_id) from kernels", "--warehouse", str(root), "--format", "json")
    assert (json.loads(old.stdout)[0], json.loads(new.stdout)[0]) == ({"count(DISTINCT trace_id)": 1},
                                                                      {"count(DISTINCT trace_id)": 2})
    [h100_id] = [line.split()[0] for line in tracelake("traces", "--warehouse", str(root)).stdout.splitlines()
                 if "NVIDIA" in line]
    tagged = tracelake("tag", h100_id, "model=bert", "--warehouse", str(root))
    assert tagged.returncode == 0, tagged.stderr
    removed = tracelake("rm", h100_id, "--warehouse", str(root))
    assert removed.returncode == 0, removed.stderr
    assert len(_snapshots(wh)) == len(after_second) + 2  # the tag and the removal: one commit each
    with wh.connect_read_only() as con:
        for schema, table in con.execute("select table_schema, table_name from information_schema.columns where "
                                         "table_catalog = current_database() and column_name = 'trace_id'").fetchall():
            left = con.execute(f'select count(*) from "{schema}"."{table}" where trace_id = ?', [h100_id]).fetchone()
            assert left == (0,), f"{schema}.{table}"
    del con  # a live reader registration would keep vacuum from deleting files
    still = tracelake("sql", "select model from runs", "--at", str(_snapshots(wh)[-2]), "--warehouse", str(root),
                      "--format", "json")
    assert sorted(json.dumps(row) for row in json.loads(still.stdout)) == ['{"model": "bert"}', '{"model": null}']
    vacuumed = tracelake("vacuum", "--keep-seconds", "0", "--warehouse", str(root))
    assert vacuumed.returncode == 0 and "reader is open" not in vacuumed.stderr, vacuumed.stderr
    assert len(_snapshots(wh)) == 1
    on_disk = {p.as_posix() for p in (root / "lake").rglob("*.parquet")}
    listed = set()
    for table in ("kernels", "raw.events", "trace_files"):
        listed |= set(tracelake("files", table, "--warehouse", str(root)).stdout.split())
    assert listed <= on_disk
    # no file of the warehouse holds the removed trace any more
    assert not [p for p in on_disk if h100_id in Path(p).read_bytes().decode("latin-1")]


def test_a_copied_lakehouse_folder_reads_its_own_files(tmp_path: Path) -> None:
    root, copy = tmp_path / "wh", tmp_path / "copy"
    assert tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--catalog", "local", "--quiet").returncode == 0
    shutil.copytree(root, copy)
    shutil.rmtree(root)  # the copy must not need a byte of the original
    counted = tracelake("sql", "select count(*) as n from kernels", "--warehouse", str(copy), "--format", "json")
    assert counted.returncode == 0 and json.loads(counted.stdout) == [{"n": 61}], counted.stderr
    listed = tracelake("files", "kernels", "--warehouse", str(copy)).stdout.split()
    assert listed and all(Path(p).is_relative_to(copy / "lake") and Path(p).is_file() for p in listed)
    copied_again = tmp_path / "copied_again"
    shutil.copytree(copy, copied_again)  # the copy left in place: a write must not land in its files
    more = tracelake("ingest", str(BERT_MI300), "--warehouse", str(copied_again), "--quiet")
    assert more.returncode == 0, more.stderr
    assert not (copy / "lake" / "raw" / "events").exists() or len(list((copy / "lake" / "raw" / "events").iterdir())) == 1
    both = tracelake("sql", "select count(distinct trace_id) as n from kernels", "--warehouse", str(copied_again),
                     "--format", "json")
    assert json.loads(both.stdout) == [{"n": 2}], both.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["files", "runs"], "main.runs is a view"),
    (["files", "no_such_table"], "no table main.no_such_table"),
    (["files", "kernels", "--at", "999"], "no snapshot 999"),
    (["sql", "select 1", "--at", "999"], "no snapshot 999"),
])
def test_lakehouse_bad_input_is_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    root = tmp_path / "wh"
    assert tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--catalog", "local", "--quiet").returncode == 0
    result = tracelake(*args, "--warehouse", str(root))
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


def test_classic_warehouse_refuses_lakehouse_options(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    made = tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--catalog", "classic", "--quiet")
    assert made.returncode == 0 and (root / "warehouse.duckdb").is_file(), made.stderr
    for args in (["files", "kernels"], ["vacuum"], ["sql", "select 1", "--at", "1"],
                 ["ingest", str(BERT_MI300), "--catalog", "local"]):
        result = tracelake(*args, "--warehouse", str(root))
        assert result.returncode == 2 and "classic layout" in result.stderr, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1
    # an old warehouse is read and written as before, without a word more
    written = tracelake("ingest", str(BERT_MI300), "--warehouse", str(root), "--quiet")
    assert written.returncode == 0 and written.stderr == "", written.stderr
    assert (root / "warehouse.duckdb").is_file() and not (root / "lake.json").exists()
    bad = tracelake("ingest", str(BERT_H100), "--warehouse", str(tmp_path / "other"), "--catalog", "mysql://x")
    assert bad.returncode == 2 and "--catalog 'mysql://x'" in bad.stderr and not (tmp_path / "other" / "lake.json").exists()


def test_a_kill_before_the_commit_leaves_the_trace_absent_and_the_next_ingest_completes_it(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    assert tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--catalog", "local", "--quiet").returncode == 0
    killed = tracelake("ingest", str(BERT_MI300), "--warehouse", str(root), "--quiet",
                       env={"TRACELAKE_CRASH_AT": "lake-commit"})
    assert killed.returncode == -9
    wh = LakeWarehouse(root)
    assert len(wh.trace_ids()) == len(wh.modelled_trace_ids()) == 1
    again = tracelake("ingest", str(BERT_MI300), "--warehouse", str(root), "--quiet")
    assert again.returncode == 0, again.stderr
    with wh.connect_read_only() as con:
        per_trace = con.execute("select count(distinct trace_id), count(*) from kernels").fetchone()
    assert per_trace == (2, 122)
    assert not [p for p in (root / "staging").iterdir()] if (root / "staging").exists() else True


def test_the_analysis_of_a_lakehouse_trace_leads_with_the_classic_ones_finding(tmp_path: Path) -> None:
    """The report is the product: on a lakehouse it must say what it says on the classic layout."""
    leads = []
    for name, extra in (("classic", []), ("lake", ["--quiet"])):
        root, out = tmp_path / name, tmp_path / f"{name}_report"
        env = {"TRACELAKE_CATALOG": "classic"} if name == "classic" else {}
        result = tracelake("analyze", str(QWEN_H100), "--warehouse", str(root), "--out", str(out), *extra, env=env)
        assert result.returncode == 0, result.stderr
        text = (out / "priority_data.json").read_text().replace(str(root), "WH").replace(str(out), "OUT")
        leads.append(json.loads(text))
    assert (tmp_path / "lake" / "lake.json").exists() and not (tmp_path / "classic" / "lake.json").exists()
    assert leads[0]["findings"] and _same_json(leads[0], leads[1])


def _same_json(left: object, right: object) -> bool:
    """Equal, floats within 1e-9 relative (parallel sums differ in their last bits)."""
    if isinstance(left, float) and isinstance(right, (int, float)):
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same_json(a, b) for a, b in zip(left, right))
    return left == right


def test_the_lakehouse_extensions_load_with_the_network_off(tmp_path: Path) -> None:
    """DuckDB would download ducklake from extensions.duckdb.org; ours come from the wheels."""
    script = ("import duckdb\n"
              "from pathlib import Path\n"
              "from tracelake.lakehouse import LakeWarehouse\n"
              "try:\n"
              "    duckdb.connect().execute('install ducklake')\n"
              "    print('downloaded')\n"
              "except duckdb.Error:\n"
              "    print('offline')\n"
              f"wh = LakeWarehouse(Path({str(tmp_path / 'wh')!r}), 'local')\n"
              "wh.prepare_for_writing()\n"
              "wh.create('local')\n"
              "with wh.connect_lake(read_only=True) as con:\n"
              "    print(con.execute(\"select count(*) from duckdb_extensions() where loaded and extension_name in "
              "('ducklake', 'sqlite_scanner')\").fetchone()[0])\n")
    # a new network namespace has no interface but loopback: nothing outside is reachable
    result = subprocess.run(["unshare", "--map-root-user", "--net", sys.executable, "-c", script],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["offline", "2"]
    shutil.rmtree(tmp_path / "wh")


def test_marts_an_older_plan_built_are_rebuilt_by_the_next_write(tmp_path: Path) -> None:
    """A TraceLake whose models differ from those the lake's marts were built with rebuilds every mart
    from the raw tables in its first write (the same transaction); a user's own table stays."""
    root = tmp_path / "wh"
    assert tracelake("ingest", str(BERT_H100), "--warehouse", str(root), "--quiet").returncode == 0
    wh = LakeWarehouse(root)
    with wh.connect_lake(read_only=False) as con:
        con.execute("update tracelake.model_plan set fingerprint = repeat('0', 64)")
        con.execute("drop table gpu_timeline")  # as if an older plan had not had it
        con.execute("create table my_notes as select 1 as note")
    again = tracelake("ingest", str(BERT_MI300), "--warehouse", str(root))
    assert again.returncode == 0 and "(models: compiled)" in again.stderr, again.stdout + again.stderr
    with wh.connect_read_only() as con:
        assert con.execute("select count(*) from gpu_timeline").fetchone() == (2,)
        assert con.execute("select note from my_notes").fetchall() == [(1,)]
        assert con.execute("select fingerprint from tracelake.model_plan").fetchone() != ("0" * 64,)
    rebuilt = tracelake("build", "--warehouse", str(root))
    assert rebuilt.returncode == 0 and rebuilt.stdout.startswith("rebuilt the models over 2 traces"), rebuilt.stderr
    jobs = tracelake("build", "--warehouse", str(root), "--jobs", "2")
    assert jobs.returncode == 2 and "--jobs" in jobs.stderr and len(jobs.stderr.strip().splitlines()) == 1


def test_a_warehouse_another_writer_is_making_is_waited_for_not_refused(tmp_path: Path) -> None:
    """Between its data folder and its catalog a new lakehouse has neither lake.json nor its SQLite
    file: opened then while its creator holds the writers' lock (a notebook beside `tracelake ingest`),
    it is that warehouse, whose writes wait for the lock; with no writer alive it is refused."""
    root = tmp_path / "wh"
    (root / "lake").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, threading, time\n"
         "from pathlib import Path\n"
         "from tracelake.lakehouse import LakeWarehouse\n"
         "with LakeWarehouse(Path(sys.argv[1]), None).write_lock():\n"
         "    print('held', flush=True)\n"
         "    time.sleep(60)\n", str(root)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert isinstance(open_warehouse(root), LakeWarehouse)
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(Exception, match="was being made a lakehouse warehouse when its writer stopped"):
        open_warehouse(root)
