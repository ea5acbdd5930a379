"""`tracelake ingest --engine ray` on a real Ray cluster gives the warehouse `--engine local` gives."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.cluster.conftest import RAY_ENV, RUN_COLUMNS, compare_registered, differences, public_relations, run_tracelake
from tests.conftest import DATA, TRACES
from tracelake.lakehouse import LakeWarehouse

JOB = DATA / "jobs" / "dlrm_8rank"


def _ingest(paths: list[Path], warehouse: Path, *engine: str) -> str:
    result = run_tracelake("ingest", *map(str, paths), "--warehouse", str(warehouse), "--catalog", "local", "--jobs", "2",
                           *engine)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _query(warehouse: Path, sql: str) -> list[tuple]:
    with LakeWarehouse(warehouse).connect_lake(read_only=True) as con:
        return con.execute(sql).fetchall()


def _columns(warehouse: Path) -> set[str]:
    rows = _query(warehouse, "select column_name from information_schema.columns where table_catalog = "
                             "current_database() and table_schema = 'main'")
    return {str(r[0]) for r in rows}


def test_ray_engine_gives_every_public_table_the_rows_of_the_local_engine(ray_address: str, tmp_path: Path) -> None:
    on_ray, local = tmp_path / "on_ray", tmp_path / "local"
    report = _ingest([TRACES], on_ray, "--engine", "ray", "--ray-address", ray_address)
    _ingest([TRACES], local, "--engine", "local")

    traces = sorted(TRACES.rglob("*.json.gz"))
    assert report.count("events") == len(traces) == 12
    with LakeWarehouse(on_ray).connect_lake(read_only=True) as lake:
        relations = public_relations(lake)
    assert {"traces", "op_perf", "kernel_summary", "gpu_timeline", "trace_quality"} <= set(relations)
    assert len(relations) > 50  # tables and views of schema main, every one compared
    assert set(RUN_COLUMNS) <= _columns(on_ray)  # every exclusion names a column that exists
    assert differences(on_ray, local) == {}
    assert _query(on_ray, "select count(*) from traces")[0][0] == 12
    # one snapshot per batch: the lake's creation, then the batch's commit
    assert len(LakeWarehouse(on_ray).snapshots()) == len(LakeWarehouse(local).snapshots())


def test_a_job_folder_ingests_its_ranks_on_ray_as_one_job(ray_address: str, tmp_path: Path) -> None:
    on_ray, local = tmp_path / "on_ray", tmp_path / "local"
    _ingest([JOB], on_ray, "--engine", "ray", "--ray-address", ray_address)
    _ingest([JOB], local)

    ranks = _query(on_ray, "select rank, file_name from job_ranks where job_id = 'dlrm_8rank' order by rank")
    assert [r[0] for r in ranks] == list(range(8))
    assert {r[1] for r in ranks} == {p.name for p in JOB.glob("*.json.gz")}
    assert differences(on_ray, local) == {}


def test_the_comparison_sees_a_changed_row(ray_address: str, tmp_path: Path) -> None:
    """The equality above could pass by comparing nothing: one row changed is found."""
    first, second = tmp_path / "first", tmp_path / "second"
    trace = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
    _ingest([trace], first, "--engine", "ray", "--ray-address", ray_address)
    _ingest([trace], second)
    assert differences(first, second) == {}
    with LakeWarehouse(second).connect_lake(read_only=False) as con:
        con.execute("update trace_quality set detail = detail || '!' where check_name = 'parses'")
    assert set(differences(first, second)) >= {"trace_quality"}


def test_python_api_ingests_on_ray(ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in RAY_ENV.items():  # this process is the driver: on the cluster's loopback address too
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TRACELAKE_CATALOG", "local")
    import tracelake

    warehouse = tmp_path / "wh"
    result = tracelake.open(warehouse, create=True).ingest([TRACES / "cpu_only"], engine="ray", ray_address=ray_address)
    assert [t.status for t in result.traces] == ["new"]
    assert _query(warehouse, "select count(*) from traces")[0][0] == 1
    import ray

    assert not ray.is_initialized()  # the driver disconnected: Ray is not left running in the caller's process


def test_traces_modelled_in_their_tasks_give_the_rows_of_the_driver(ray_address: str, tmp_path: Path) -> None:
    """Into a warehouse whose marts exist, each task on a cluster also runs the incremental models
    over its own trace (tracelake/task_models.py) and the driver inserts those rows: the same
    warehouse as the driver's own update of the batch."""
    first = TRACES / "b200" / "eager_trace.json.gz"
    on_ray, local = tmp_path / "on_ray", tmp_path / "local"
    for warehouse in (on_ray, local):
        _ingest([first], warehouse)
    _ingest([TRACES], on_ray, "--engine", "ray", "--ray-address", ray_address)
    _ingest([TRACES], local)
    assert _query(on_ray, "select count(*) from traces")[0][0] == 12
    assert differences(on_ray, local) == {}


def test_a_task_writes_every_incremental_model_of_its_trace_as_the_driver_computes_it(tmp_path: Path) -> None:
    from tracelake.ingest.reader import file_sha256
    from tracelake.lakehouse import _shipped_plans
    from tracelake.ray_engine import stage_on_worker
    from tracelake.task_models import DRIVER_ONLY_MODELS, precomputed_models

    trace = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    (tmp_path / "staged").mkdir()
    staged = stage_on_worker(str(trace), file_sha256(trace), str(tmp_path / "staged"), {}, True)
    written = precomputed_models(staged)
    incremental = {m.name for m in _shipped_plans().incremental.models}
    assert set(written) == incremental - DRIVER_ONLY_MODELS and len(written) > 20
    warehouse = tmp_path / "wh"
    _ingest([trace], warehouse)
    with LakeWarehouse(warehouse).connect_lake(read_only=True) as lake, duckdb.connect() as con:
        for model in _shipped_plans().incremental.models:
            if model.name in written:
                con.register("a_rows", lake.execute(f"select * from {model.relation.split('.', 1)[1]}").to_arrow_table())
                con.register("b_rows", con.execute(f"select * from read_parquet('{written[model.name]}')").to_arrow_table())
                assert compare_registered(con) == "", model.name
