"""`tracelake ingest`, `sql` and `traces` through the real command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli
from tracelake.ingest.parquet_io import PARQUET_COMPRESSION


def test_ingest_prints_one_line_per_trace_and_the_marts_answer(small_warehouse: Path) -> None:
    result = run_cli("sql", "select count(*) as n, min(total_time_ms) > 0 as positive from gpu_timeline",
                     "--warehouse", str(small_warehouse), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"n": 1, "positive": True}]


def test_reingest_is_a_no_op(small_warehouse: Path) -> None:
    before = snapshot(small_warehouse)
    result = run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(small_warehouse))
    assert result.returncode == 0, result.stderr
    assert "already ingested" in result.stdout
    assert snapshot(small_warehouse) == before


def test_same_content_under_another_name_is_the_same_trace(small_warehouse: Path, tmp_path: Path) -> None:
    copy = tmp_path / "renamed.json.gz"
    shutil.copy(SMALL_TRACE, copy)
    result = run_cli("ingest", str(copy), "--warehouse", str(small_warehouse))
    assert result.returncode == 0 and "already ingested" in result.stdout


def test_sql_formats(small_warehouse: Path) -> None:
    query = "select trace_id, total_time_ms from gpu_timeline"
    as_json = json.loads(run_cli("sql", query, "--warehouse", str(small_warehouse), "--format", "json").stdout)
    assert isinstance(as_json, list) and set(as_json[0]) == {"trace_id", "total_time_ms"}
    as_csv = run_cli("sql", query, "--warehouse", str(small_warehouse), "--format", "csv").stdout.splitlines()
    assert as_csv[0] == "trace_id,total_time_ms" and as_csv[1].startswith(as_json[0]["trace_id"] + ",")
    as_table = run_cli("sql", query, "--warehouse", str(small_warehouse)).stdout
    assert "trace_id" in as_table and "(1 row)" in as_table


def test_traces_lists_tags_and_device(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    trace = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    assert run_cli("ingest", str(trace), "--warehouse", str(folder), "--tag", "model=bert", "--tag", "mode=inference").returncode == 0
    listed = json.loads(run_cli("traces", "--warehouse", str(folder), "--format", "json").stdout)
    assert len(listed) == 1
    assert listed[0]["device_name"] == "NVIDIA H100 80GB HBM3"
    assert listed[0]["tags"] == {"model": "bert", "mode": "inference"}
    mode = json.loads(run_cli("sql", "select mode from traces", "--warehouse", str(folder), "--format", "json").stdout)
    assert mode == [{"mode": "inference"}]
    runs = json.loads(run_cli("sql", "select model, mode, mode_source, platform from runs where model = 'bert' "
                              "and mode = 'inference'", "--warehouse", str(folder), "--format", "json").stdout)
    assert runs == [{"model": "bert", "mode": "inference", "mode_source": "tag", "platform": "H100"}]


def test_mode_tag_must_be_training_or_inference(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    trace = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    result = run_cli("ingest", str(trace), "--warehouse", str(folder), "--tag", "mode=eval")
    assert result.returncode == 2
    assert "training, inference" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (folder / "parquet").exists()


def test_folder_ingest_in_parallel_then_cross_trace_query(warehouse) -> None:
    """The session warehouse was filled by one parallel folder ingest; query across traces."""
    result = run_cli(
        "sql",
        "select t.device_name, count(*) as kernels, sum(k.dur_us) / 1000 as kernel_ms "
        "from kernels k join traces t using (trace_id) group by 1 order by 1",
        "--warehouse", str(warehouse.root), "--format", "json",
    )
    assert result.returncode == 0, result.stderr
    devices = {row["device_name"] for row in json.loads(result.stdout)}
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA B200", "AMD Instinct MI210"} <= devices


def test_second_folder_ingest_adds_nothing(warehouse) -> None:
    before = snapshot(warehouse.root / "parquet")
    result = run_cli("ingest", str(TRACES), "--warehouse", str(warehouse.root))
    assert result.returncode == 0, result.stderr
    assert "0 new" in result.stderr
    assert snapshot(warehouse.root / "parquet") == before


def test_concurrent_ingests_into_one_warehouse(small_warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(small_warehouse, folder)
    traces = [TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz",
              TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"]
    processes = [
        subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", str(t), "--warehouse", str(folder), "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for t in traces
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr
    rows = json.loads(run_cli("sql", "select count(*) as n from gpu_timeline", "--warehouse", str(folder), "--format", "json").stdout)
    assert rows == [{"n": 3}]


def test_build_runs_dbt_models_and_data_tests(warehouse, tmp_path: Path) -> None:
    """`tracelake build` = dbt build over every trace: all models and yml/singular tests pass."""
    folder = tmp_path / "wh"
    shutil.copytree(warehouse.root, folder)  # the session warehouse stays open read-only elsewhere
    result = run_cli("build", "--warehouse", str(folder), "--jobs", "2")
    assert result.returncode == 0, result.stderr
    log = (folder / "dbt" / "logs" / "dbt.log").read_text()
    assert "ERROR=0" in log and "PASS=" in log
    assert "Concurrency: 2 threads" in log  # the data tests run two at a time
    passed = int(log.rsplit("PASS=", 1)[1].split()[0])
    assert passed > 150  # 18 models + ~160 data tests


def _raw_files(folder: Path) -> dict[str, str]:
    """The raw tables' data, trace_files aside: Parquet partitions (classic) or files (lakehouse)."""
    if (folder / "parquet").is_dir():
        return {k: v for k, v in snapshot(folder / "parquet").items() if "trace_files" not in k}
    listed = {}
    for table in ("events", "host_ops", "gpu_ops", "flows", "ingest_checks"):
        files = run_cli("files", f"raw.{table}", "--warehouse", str(folder))
        assert files.returncode == 0, files.stderr
        listed[table] = files.stdout
    return listed


@pytest.mark.parametrize("layout", ["lakehouse", "classic"])
def test_reingest_with_tags_updates_the_tags_only(tmp_path: Path, layout: str) -> None:
    folder = tmp_path / "wh"
    trace = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    catalog = ["--catalog", "classic"] if layout == "classic" else []
    assert run_cli("ingest", str(trace), "--warehouse", str(folder), "--tag", "model=bert", *catalog).returncode == 0
    before = _raw_files(folder)
    again = run_cli("ingest", str(trace), "--warehouse", str(folder), "--tag", "run=r2", "--tag", "mode=inference")
    assert again.returncode == 0 and "already ingested; tags updated" in again.stdout
    listed = json.loads(run_cli("sql", "select model, run, mode, mode_source from runs", "--warehouse", str(folder),
                                "--format", "json").stdout)
    assert listed == [{"model": "bert", "run": "r2", "mode": "inference", "mode_source": "tag"}]
    assert _raw_files(folder) == before
    if layout == "classic":
        rewritten = pq.ParquetFile(next((folder / "parquet" / "trace_files").glob("*/*.parquet")))
        assert rewritten.metadata.row_group(0).column(0).compression == PARQUET_COMPRESSION.upper()  # as ingest writes
    same = run_cli("ingest", str(trace), "--warehouse", str(folder), "--tag", "run=r2")
    assert same.returncode == 0 and "already ingested" in same.stdout and "tags updated" not in same.stdout


def test_relative_warehouse_path_from_another_folder(tmp_path: Path) -> None:
    """dbt runs in the project folder: a relative --warehouse must still mean the caller's folder."""
    result = run_cli("ingest", str(SMALL_TRACE), "--warehouse", "relative_wh", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "relative_wh" / "lake.json").is_file()
    rows = run_cli("sql", "select count(*) as n from gpu_timeline", "--warehouse", "relative_wh", "--format", "json",
                   cwd=tmp_path)
    assert json.loads(rows.stdout) == [{"n": 1}]


def test_the_first_ingest_says_nothing_on_stderr(tmp_path: Path) -> None:
    # the first trace of a warehouse runs dbt, whose worker pools leave clean-up work for exit:
    # ending the process early must still do it (else multiprocessing warns of leaked semaphores)
    result = run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(tmp_path / "wh"), "--quiet")
    assert result.returncode == 0
    assert result.stderr == ""
