"""A lakehouse model update reads only the new traces' raw rows (tracelake/lake_scope.py) and gives
the marts a warehouse built in one go has: traces added one at a time to a lake that already holds
others, against the same traces ingested in one build."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb

from tests.conftest import DATA, TRACES
from tracelake.ingestion import ingest_paths
from tracelake.lake_scope import scope_to_traces
from tracelake.lakehouse import LakeWarehouse, _in_catalog, _shipped_plans

BERT_H100 = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
GPU_ONLY = TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz"
COMPILED = TRACES / "torch_compile_triton" / "trace.json.gz"
CAPTURES = DATA / "captures"  # outside TRACES (tests/data/README.md)
# what differs between two ingests of the same file: when and how fast (run_label is the ingest time
# of an untagged trace, and trace_label carries it)
PER_INGEST_COLUMNS = {"ingested_at", "ingest_seconds", "run_label", "trace_label"}


def _lake(root: Path, batches: list[list[Path]]) -> LakeWarehouse:
    wh = LakeWarehouse(root, "local")
    for batch in batches:
        report = ingest_paths(batch, wh, tags={}, jobs=1)
        assert not report.failed, report.failed
    return wh


def _tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    return con.execute("select table_schema, table_name from information_schema.tables where table_catalog = "
                       "current_database() and table_schema in ('main', 'intermediate') order by all").fetchall()


def _rounded(value: object) -> object:
    """Floats to 9 significant digits: the two warehouses sum the same values in another order."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _rows(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> list[str]:
    """The rows as a sorted multiset, floats rounded, without the times of the ingest itself."""
    columns = [name for name, kind, *_ in con.execute(f'describe "{schema}"."{table}"').fetchall()
               if name not in PER_INGEST_COLUMNS and "TIMESTAMP" not in kind]
    listed = ", ".join(f'"{c}"' for c in columns)
    return sorted(json.dumps(_rounded(json.loads(row[0])), sort_keys=True) for row in con.execute(
        f'select to_json(struct_pack({listed}))::varchar from "{schema}"."{table}"').fetchall())


def test_traces_added_one_at_a_time_give_the_marts_of_one_build(tmp_path: Path) -> None:
    at_once = _lake(tmp_path / "at_once", [[BERT_H100, BERT_MI300, GPU_ONLY, COMPILED]])
    one_by_one = _lake(tmp_path / "one_by_one", [[BERT_H100, BERT_MI300], [GPU_ONLY], [COMPILED]])
    with at_once.connect_read_only() as built, one_by_one.connect_read_only() as updated:
        tables = _tables(built)
        assert tables == _tables(updated) and len(tables) > 30
        filled = 0
        for schema, table in tables:
            rows = _rows(built, schema, table)
            assert rows == _rows(updated, schema, table), f"{schema}.{table}"
            filled += bool(rows)
        kernels = updated.execute("select count(distinct trace_id) from kernels").fetchone()
    assert filled > 25 and kernels == (4,)


def test_the_scoped_views_see_only_the_new_traces_raw_rows(tmp_path: Path) -> None:
    wh = _lake(tmp_path / "wh", [[BERT_H100, BERT_MI300, GPU_ONLY]])
    with wh.connect_read_only() as con:
        every = dict(con.execute("select trace_id, count(*) from raw.events group by 1").fetchall())
        [(gpu_only_id,)] = con.execute("select trace_id from traces where file_name = ?", [GPU_ONLY.name]).fetchall()
    assert len(every) == 3
    with wh.connect_lake(read_only=True) as con:
        scoped = scope_to_traces(con, _shipped_plans(), [gpu_only_id], _in_catalog(con))
        staged_events = scoped('"warehouse"."staging"."stg_trace__events"')
        seen = con.execute(f"select trace_id, count(*) from {staged_events} group by 1").fetchall()
        # a model's own SQL is rewritten to read the scoped views, never the lake's
        kernels_sql = next(m for m in _shipped_plans().incremental.models if m.name == "kernels").select_for([gpu_only_id])
        rewritten = scoped(kernels_sql)
        assert '"warehouse"."staging"' not in rewritten and '"warehouse"."intermediate"."int_gpu_ops_linked' not in rewritten
        assert con.execute(f"select count(*), count(distinct trace_id) from ({rewritten})").fetchone() == (
            con.execute("select count(*), 1 from kernels where trace_id = ?", [gpu_only_id]).fetchone())
    assert seen == [(gpu_only_id, every[gpu_only_id])]


def test_a_graph_replay_added_with_its_capture_gives_the_marts_of_one_build(tmp_path: Path) -> None:
    """A replay's marts read its capture trace, here already in the lake: its batch is modelled
    through the lake, not from its own files alone."""
    folder = tmp_path / "vllm"
    (folder / "capture_traces").mkdir(parents=True)
    shutil.copyfile(TRACES / "inference" / "vllm_decode_full" / "graph_execution.json.gz", folder / "graph_execution.json.gz")
    capture = CAPTURES / "inference__vllm_decode_full" / "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
    shutil.copyfile(capture, folder / "capture_traces" / capture.name)
    at_once = _lake(tmp_path / "at_once", [[BERT_H100, folder]])
    one_by_one = _lake(tmp_path / "one_by_one", [[BERT_H100, folder / "capture_traces" / capture.name], [folder]])
    with at_once.connect_read_only() as built, one_by_one.connect_read_only() as updated:
        replays = updated.execute("select count(*) from traces where tags['graph_capture_traces'] is not null").fetchone()
        assert replays == (1,)  # the batch does hold a replay linked to its capture
        for schema, table in _tables(built):
            assert _rows(built, schema, table) == _rows(updated, schema, table), f"{schema}.{table}"
