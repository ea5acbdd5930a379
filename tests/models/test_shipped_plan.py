"""The plans shipped in tracelake/compiled/ are what dbt compiles from the project now, a warehouse
built from them answers every model like one built by dbt, and an edited project falls back to dbt."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES
from tracelake import dbt_runner
from tracelake.config import PROJECT_ROOT
from tracelake.dbt_runner import project_fingerprint
from tracelake.ingestion import ingest_paths
from tracelake.plan_compiler import compile_shipped_plans, differences
from tracelake.shipped_plan import (
    INDEX_FILE,
    MODELS_FOLDER,
    SHIPPED_DIR,
    IncrementalPlan,
    load_shipped_plans,
    read_compiled_plan,
    write_compiled_plan,
)
from tracelake.table_docs import DOCS_FILE, TableDoc, read_docs, write_docs
from tracelake.warehouse import Warehouse

pytestmark = pytest.mark.usefixtures("classic_layout")  # the dbt-built plan of the classic layout; tests/lake: the lakehouse's rebuild

SMALL = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
OTHER = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
VOLATILE_COLUMNS = {"models_updated_at"}  # current_timestamp of the build that wrote the row
PROJECT_PARTS = ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "dbt_tests")


def test_the_shipped_plans_are_what_dbt_compiles_from_the_project(tmp_path: Path) -> None:
    assert load_shipped_plans(project_fingerprint()) is not None, (
        "tracelake/compiled/ is not from this project: run `python -m tracelake.plan_compiler`")
    compile_shipped_plans(tmp_path / "compiled", tmp_path)
    assert differences(tmp_path / "compiled", SHIPPED_DIR) == []


def test_each_model_is_its_own_file_beside_a_small_index() -> None:
    """A change to one model reads as a change to that model's SQL file in a diff: the index holds
    only names, relations and order, in short lines."""
    plans = read_compiled_plan(SHIPPED_DIR)
    files = sorted(path.stem for path in (SHIPPED_DIR / MODELS_FOLDER).glob("*.sql"))
    assert files == sorted(node.name for node in plans.build.nodes)
    index = (SHIPPED_DIR / INDEX_FILE).read_text()
    assert max(len(line) for line in index.splitlines()) <= 120
    assert "select" not in index.lower()
    incremental = {node.name: node.sql for node in plans.build.nodes if node.materialized == "incremental"}
    assert {model.name: model.sql for model in plans.incremental.models} == incremental


def test_the_compiled_folder_reads_back_as_written(tmp_path: Path) -> None:
    plans = read_compiled_plan(SHIPPED_DIR)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:  # dbt's relations name the database "warehouse"
        for seed in plans.build.seeds:
            con.execute(f"create table {seed.relation} as select * from read_parquet(?)", [plans.seed_file(seed).as_posix()])
        write_compiled_plan(tmp_path / "compiled", plans.build, plans.incremental, con)
    docs = read_docs()
    write_docs(tmp_path / "compiled", list(docs.values()))
    assert differences(tmp_path / "compiled", SHIPPED_DIR) == []
    # the yml's column docs ship with the plan (tracelake mcp's describe_table reads them): a drift shows
    assert docs["gpu_timeline"].columns["busy_time_percent"].startswith("busy_time_ms as a percent of total_time_ms")
    write_docs(tmp_path / "compiled", [*(d for d in docs.values() if d.name != "findings"),
                                       TableDoc("findings", "edited", docs["findings"].columns)])
    assert differences(tmp_path / "compiled", SHIPPED_DIR) == [f"{DOCS_FILE}: the public tables' documentation differs"]
    write_docs(tmp_path / "compiled", list(docs.values()))
    again = read_compiled_plan(tmp_path / "compiled")
    assert (again.build, again.incremental) == (plans.build, plans.incremental)
    (tmp_path / "compiled" / MODELS_FOLDER / "gpu_timeline.sql").unlink()
    assert load_shipped_plans(plans.build.fingerprint, tmp_path / "compiled") is None
    assert load_shipped_plans("0" * 64) is None


def test_a_warehouse_plan_without_dependencies_runs_each_model_after_all_before_it() -> None:
    """A warehouse plan written before dependencies were recorded."""
    plan = IncrementalPlan.from_json('{"fingerprint": "f", "models": [{"name": "a", "relation": "ra", "sql": "x"}, '
                                     '{"name": "b", "relation": "rb", "sql": "y"}]}')
    assert [model.depends_on for model in plan.models] == [(), ("ra",)]
    assert IncrementalPlan.from_json(plan.to_json()) == plan
    with pytest.raises(ValueError):
        IncrementalPlan.from_json('{"fingerprint": "f"}')


def _relations(con: duckdb.DuckDBPyConnection) -> list[str]:
    plans = load_shipped_plans(project_fingerprint())
    assert plans is not None
    return [seed.relation for seed in plans.build.seeds] + [node.relation for node in plans.build.nodes]


def _select(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    columns = [row[0] for row in con.execute(f"describe {relation}").fetchall() if row[0] not in VOLATILE_COLUMNS]
    return "select " + ", ".join(f'"{c}"' for c in columns) + f" from {relation}"


def _digest(con: duckdb.DuckDBPyConnection, relation: str) -> tuple:
    return con.execute(f"select count(*), sum(hash(r))::hugeint from ({_select(con, relation)}) r").fetchall()[0]


def _same(x: object, y: object) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    return x == y


def test_a_warehouse_built_from_the_shipped_plan_answers_like_one_built_by_dbt(warehouse: Warehouse,
                                                                              tmp_path: Path) -> None:
    """The session warehouse (every test trace) was built from the shipped plan by its first ingest;
    a copy rebuilt by `dbt build --full-refresh` must hold the same rows in every seed and model."""
    dbt_built = Warehouse(tmp_path / "dbt_built")
    shutil.copytree(warehouse.root, dbt_built.root)
    with dbt_built.write_lock():
        dbt_built.repair()  # a copied warehouse: its raw views read its own Parquet
        dbt_built.build(run_tests=False, full_refresh=True, threads=2)
    with warehouse.connect_read_only() as ours, dbt_built.connect_read_only() as theirs:
        relations = _relations(ours)
        assert len(relations) > 60
        assert ours.execute("select count(*) from traces").fetchall()[0][0] >= 10
        for relation in relations:
            if _digest(ours, relation) == _digest(theirs, relation):
                continue
            order = " order by all"
            expected = theirs.execute(_select(theirs, relation) + order).fetchall()
            got = ours.execute(_select(ours, relation) + order).fetchall()
            assert len(expected) == len(got), relation
            assert _same(expected, got), relation


def _edited_project(folder: Path) -> Path:
    folder.mkdir()
    for part in PROJECT_PARTS:
        source = PROJECT_ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copyfile)(source, folder / part)
    model = folder / "models" / "marts" / "traces.sql"
    text = model.read_text()
    assert text.rstrip().endswith("select * from final")
    model.write_text(text.rstrip()[: -len("select * from final")] + "select *, 'yes' as edited_by_user from final\n")
    return folder


def test_an_edited_model_falls_back_to_dbt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    edited = _edited_project(tmp_path / "project")
    monkeypatch.setattr(dbt_runner, "PROJECT_ROOT", edited)  # what the fingerprint hashes
    monkeypatch.setattr(dbt_runner, "DBT_PROJECT_DIR", edited)  # where dbt runs (the same folder in a checkout)
    assert load_shipped_plans(project_fingerprint()) is None
    warehouse = Warehouse(tmp_path / "wh")
    first = ingest_paths([SMALL], warehouse, {}, jobs=1)
    assert first.model_update == "dbt"
    assert "differs from the plan compiled into TraceLake" in capsys.readouterr().err
    second = ingest_paths([OTHER], warehouse, {}, jobs=1)  # the plan dbt compiled from the edited project
    assert second.model_update == "fast"
    with warehouse.connect_read_only() as con:
        assert con.execute("select edited_by_user, count(*) from traces group by all").fetchall() == [("yes", 2)]


def test_a_warehouse_an_older_project_built_is_rebuilt_from_the_shipped_plan(built_once, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(built_once(SMALL), folder)
    warehouse = Warehouse(folder)
    with duckdb.connect(str(warehouse.db_path)) as con:
        con.execute("create table my_notes as select 1 as note")  # the user's own table stays
    warehouse.plan_path.write_text(warehouse.plan_path.read_text().replace(project_fingerprint(), "0" * 64))
    report = ingest_paths([OTHER], warehouse, {}, jobs=1)
    assert report.model_update == "compiled"
    with warehouse.connect_read_only() as con:
        assert con.execute("select count(*) from gpu_timeline").fetchone() == (2,)
        assert con.execute("select note from my_notes").fetchall() == [(1,)]
    assert project_fingerprint() in warehouse.plan_path.read_text()
