"""The Python API: a notebook-style script ingests, queries into polars and analyzes while a CLI
ingest writes the same warehouse beside it; handles, selectors and typed results."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import tracelake
from tests.conftest import TRACES
from tracelake.analyzers.contracts import PriorityData
from tracelake.core.errors import TraceLakeError
from tracelake.lakehouse import open_warehouse

NOTEBOOK = Path(__file__).parent / "notebook_example.py"
H100_BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
MI300_BERT = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
COMPILED = TRACES / "torch_compile_triton" / "trace.json.gz"


def test_a_notebook_ingests_queries_and_analyzes_while_the_cli_writes(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    env = {**os.environ, "DO_NOT_TRACK": "1", "NOTEBOOK_WAREHOUSE": str(warehouse),
           "NOTEBOOK_TRACES": os.pathsep.join(map(str, (H100_BERT, MI300_BERT, COMPILED))),
           "NOTEBOOK_OUT": str(tmp_path / "report")}
    cli = subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", str(COMPILED), "--warehouse", str(warehouse),
                            "--quiet"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    notebook = subprocess.run([sys.executable, str(NOTEBOOK)], env=env, capture_output=True, text=True, timeout=600)
    cli_out, cli_err = cli.communicate(timeout=600)
    assert cli.returncode == 0, cli_err
    assert notebook.returncode == 0, notebook.stderr
    seen = json.loads(notebook.stdout.strip().splitlines()[-1])

    with open_warehouse(warehouse).connect_read_only() as con:
        kernels = con.execute("select count(*) from kernels where trace_id = ?", [seen["first_id"]]).fetchone()[0]
        top = con.execute("select name from kernels where trace_id = ? group by name order by sum(dur_us) desc limit 1",
                          [seen["first_id"]]).fetchone()[0]
        trace_count = con.execute("select count(*) from traces").fetchone()[0]
    assert seen["traces_type"] == "DataFrame"
    assert seen["kernel_trace_ids"] == [seen["first_id"]]  # the tag selector picked the tagged trace only
    assert (seen["kernel_rows"], seen["top_kernel"]) == (kernels, top)
    assert seen["trace_count_at_end"] == trace_count == 3  # the CLI's trace reached the open handle
    priority = PriorityData.model_validate_json((tmp_path / "report" / "priority_data.json").read_text())
    p1 = min(priority.findings, key=lambda f: f.global_rank)
    assert (seen["p1_rank"], seen["p1_title"]) == (1, p1.title)
    assert seen["finding_count"] == len(priority.findings)
    assert Path(seen["analysis_md"]).read_text().startswith("#")


@pytest.fixture(scope="module")
def api_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("api") / "wh"
    result = tracelake.open(folder, create=True).ingest([H100_BERT, MI300_BERT], tags={"model": "bert"}, jobs=1)
    assert result.model_update == "compiled" and len(result.trace_ids) == 2
    return folder


def test_the_package_names_its_api() -> None:
    assert {"open", "analyze", "__version__"} <= set(dir(tracelake))
    assert callable(tracelake.open) and callable(tracelake.analyze)
    stage = importlib.import_module("tracelake.ingest")  # the stage folder ingest/, not a function
    assert stage is tracelake.ingest and not callable(stage)


def test_a_handle_queries_tables_and_selectors(api_warehouse: Path) -> None:
    with tracelake.open(api_warehouse) as wh:
        traces = wh.traces()
        assert isinstance(traces, pl.DataFrame) and traces.height == 2
        relation = wh.sql("select trace_id, busy_time_ms from gpu_timeline order by trace_id")
        assert relation.pl().height == 2 and len(relation.fetchall()) == 2
        h100 = traces.filter(pl.col("device_name").str.contains("H100"))["trace_id"][0]
        one = wh.table("gpu_timeline", trace=h100[:8])
        assert one["trace_id"].to_list() == [h100]
        assert wh.table("gpu_timeline", trace="model=bert").height == 2
        assert "kernels" in wh.tables()
        with pytest.raises(TraceLakeError, match="no public table"):
            wh.table("kernels; drop table kernels")
        with pytest.raises(TraceLakeError):
            wh.sql("drop table kernels")
        with pytest.raises(TraceLakeError, match="no trace"):
            wh.table("kernels", trace="0123456789abcdef")


def test_ingest_reports_known_and_failed_files(api_warehouse: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [')
    result = tracelake.open(api_warehouse).ingest([H100_BERT, broken], jobs=1)
    statuses = {t.path.name: t.status for t in result.traces}
    assert statuses == {H100_BERT.name: "known", "broken.json": "failed"}
    assert result.failed[0].message
    assert len(result.trace_ids) == 1


def test_open_refuses_a_folder_without_a_warehouse(tmp_path: Path) -> None:
    with pytest.raises(TraceLakeError, match="no warehouse"):
        tracelake.open(tmp_path)
