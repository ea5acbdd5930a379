"""An analysis' working copy of a lakehouse (tracelake/lake_reader.py): every relation of the copy
holds exactly the lake's rows of the analysis' traces, with the lake's column types, on real
traces; a trace's scope takes in its job's ranks and its graph captures; a table whose rows a
delete changed is read through the lake, never from its stale files."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES
from tests.lake.lake_tables import rows_of
from tracelake import lake_reader, working_copies
from tracelake.ingestion import ingest_paths
from tracelake.lake_reader import analysis_scope, only_ledger_changes, trace_tags
from tracelake.lakehouse import LakeWarehouse

BERT_H100 = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
GPU_ONLY = TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz"
VLLM_REPLAY = TRACES / "inference" / "vllm_decode_full"


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> LakeWarehouse:
    """Two ranks of a job, a trace of no job, and a graph replay with its captures."""
    wh = LakeWarehouse(tmp_path_factory.mktemp("lake"), "local")
    for paths, tags in (([BERT_H100], {"job": "j1", "job_rank": "0"}), ([BERT_MI300], {"job": "j1", "job_rank": "1"}),
                        ([GPU_ONLY, VLLM_REPLAY], {})):  # the last two share each table's data file
        report = ingest_paths(paths, wh, tags=tags, jobs=1)
        assert not report.failed, report.failed
    return wh


def _ids_by_path(wh: LakeWarehouse) -> dict[Path, str]:
    with wh.connect_read_only() as con:
        return {Path(str(path)).resolve(): str(trace_id) for trace_id, path in
                con.execute("select trace_id, source_path from raw.trace_files").fetchall()}


def _relations(con: duckdb.DuckDBPyConnection, catalog: str) -> dict[tuple[str, str], list[str]]:
    """(schema, relation) -> its columns, for every table and view of `catalog`."""
    found: dict[tuple[str, str], list[str]] = {}
    for schema, name, column in con.execute(
            "select table_schema, table_name, column_name from information_schema.columns where table_catalog = ? "
            "order by table_schema, table_name, ordinal_position", [catalog]).fetchall():
        found.setdefault((str(schema), str(name)), []).append(str(column))
    return found


def _types(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> list[tuple[str, str]]:
    return [(str(r[0]), str(r[1])) for r in con.execute(f'describe "{schema}"."{name}"').fetchall()]


def _assert_rows_of_no_trace(lake_con: duckdb.DuckDBPyConnection, copy: duckdb.DuckDBPyConnection, schema: str,
                             name: str, columns: list[str], scope: list[str]) -> None:
    """A seed is copied whole; a view of no trace (kernel names, a job's figures) holds only rows the
    lake's has, and every row of the scope's jobs."""
    kind = lake_con.execute("select table_type from information_schema.tables where table_schema = ? and table_name = ?",
                            [schema, name]).fetchone()
    copied, lake_rows = rows_of(copy, schema, name), rows_of(lake_con, schema, name)
    if kind == ("BASE TABLE",):
        assert copied == lake_rows, (schema, name)
        return
    assert not copied - lake_rows, (schema, name)
    if "job_id" in columns:
        jobs = {str(tags.get("job")) for trace_id, tags in trace_tags(lake_con, "raw.trace_files").items()
                if trace_id in scope and tags.get("job")}
        index = columns.index("job_id")
        assert (Counter({row: n for row, n in copied.items() if row[index] in jobs})
                == Counter({row: n for row, n in lake_rows.items() if row[index] in jobs})), (schema, name)


def _assert_copy_holds_the_scope(wh: LakeWarehouse, analyzed: list[str]) -> list[str]:
    """Every table and view of the copy: the lake's columns and types, and (with a trace_id) the
    lake's rows of the scope. Returns the scope."""
    with wh.connect_lake(read_only=True, own_instance=True) as lake_con, wh.connect_analysis(analyzed) as copy:
        scope = analysis_scope(trace_tags(lake_con, "raw.trace_files"), analyzed)
        lake_relations, copy_relations = _relations(lake_con, "warehouse"), _relations(copy, "memory")
        assert set(copy_relations) == set(lake_relations)
        compared = 0
        for (schema, name), columns in sorted(lake_relations.items()):
            assert _types(copy, schema, name) == _types(lake_con, schema, name), (schema, name)
            if "trace_id" not in columns:
                _assert_rows_of_no_trace(lake_con, copy, schema, name, columns, scope)
                continue
            expected = rows_of(lake_con, schema, name, f"trace_id in ({', '.join(repr(t) for t in scope)})")
            assert rows_of(copy, schema, name) == expected, (schema, name)
            compared += bool(expected)
    assert compared > 50  # the marts hold rows of the scope: empty tables would prove nothing
    return scope


def test_a_job_ranks_copy_holds_its_jobs_ranks_and_nothing_else(lake: LakeWarehouse) -> None:
    ids = _ids_by_path(lake)
    rank0, rank1 = ids[BERT_H100.resolve()], ids[BERT_MI300.resolve()]
    assert _assert_copy_holds_the_scope(lake, [rank0]) == sorted([rank0, rank1])


def test_a_trace_of_no_job_is_copied_alone(lake: LakeWarehouse) -> None:
    alone = _ids_by_path(lake)[GPU_ONLY.resolve()]
    assert _assert_copy_holds_the_scope(lake, [alone]) == [alone]


def test_the_scope_takes_in_a_jobs_ranks_and_a_replays_captures_both_ways() -> None:
    tags = {"r0": {"job": "a"}, "r1": {"job": "a"}, "other": {"job": "b"}, "plain": {},
            "replay": {"graph_capture_traces": "cap1,cap2"}, "cap1": {}, "cap2": {}, "cap3": {}}
    assert analysis_scope(tags, ["r1"]) == ["r0", "r1"]
    assert analysis_scope(tags, ["plain"]) == ["plain"]
    assert analysis_scope(tags, ["replay"]) == ["cap1", "cap2", "replay"]
    assert analysis_scope(tags, ["cap2"]) == ["cap1", "cap2", "replay"]  # the replay reads its sibling capture too
    assert analysis_scope(tags, ["plain", "other"]) == ["other", "plain"]
    assert analysis_scope(tags, ["gone"]) == []


def test_a_table_a_re_model_deleted_rows_of_is_copied_as_the_lake_reads_it(lake: LakeWarehouse) -> None:
    alone = _ids_by_path(lake)[GPU_ONLY.resolve()]
    with lake.write_lock():
        assert lake.retag_traces({alone: ({"graph_capture_batch_size": "8"}, ())}) == [alone]
    with lake.connect_lake(read_only=True, own_instance=True) as lake_con:
        deleted = lake_con.execute("select count(*) from ducklake_table_info(current_database()) "
                                   "where delete_file_count > 0").fetchone()
    assert deleted is not None and deleted[0] >= 1  # the retag rewrote its row of a file it shares with another trace
    assert _assert_copy_holds_the_scope(lake, [alone]) == [alone]


def test_a_copy_whose_tables_are_all_too_large_to_hold_reads_them_from_their_files(
        lake: LakeWarehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lake_reader, "WORKING_COPY_TABLE_MAX_BYTES", 0)
    monkeypatch.setattr(working_copies, "_KEPT", {})
    ids = _ids_by_path(lake)
    with lake.connect_analysis([ids[BERT_H100.resolve()]]) as copy:
        kinds = dict(copy.execute("select table_schema || '.' || table_name, table_type from information_schema.tables "
                                  "where table_catalog = current_database()").fetchall())
    assert kinds["raw.events"] == kinds["main.kernels"] == kinds["intermediate.int_op_perf_models"] == "VIEW"
    _assert_copy_holds_the_scope(lake, [ids[BERT_H100.resolve()]])


def test_only_recorded_analyses_leave_a_copy_current() -> None:
    names = {7: "kernels", 158: "analyses", 161: "findings"}
    ledger = ("findings", "analyses")
    assert only_ledger_changes([], names, ledger)
    assert only_ledger_changes(['created_table:"main"."findings",created_table:"main"."analyses",'
                                "inserted_into_table:158,inserted_into_table:161", "deleted_from_table:161"], names, ledger)
    assert not only_ledger_changes(["inserted_into_table:7"], names, ledger)  # a mart changed
    assert not only_ledger_changes(['created_table:"main"."kernels"'], names, ledger)
    assert not only_ledger_changes(['created_view:"main"."v"'], names, ledger)
    assert not only_ledger_changes(["inserted_into_table:158,altered_table:158"], names, ledger)
    assert not only_ledger_changes(["something new"], names, ledger)


def test_a_view_that_reads_other_traces_has_the_whole_warehouses_rows_in_the_copy(tmp_path: Path) -> None:
    """op_best_observed names, for an op of the analyzed trace, the faster run of the same op in
    another trace of the warehouse: the copy of the slower trace alone still has those rows."""
    faster = tmp_path / "faster" / BERT_H100.name
    faster.parent.mkdir()
    document = json.loads(gzip.decompress(BERT_H100.read_bytes()))
    for event in document["traceEvents"]:
        if event.get("cat") == "kernel" and "dur" in event:
            event["dur"] = event["dur"] / 2
    faster.write_bytes(gzip.compress(json.dumps(document).encode()))
    wh = LakeWarehouse(tmp_path / "lake", "local")
    for path in (BERT_H100, faster):
        assert not ingest_paths([path], wh, tags={}, jobs=1).failed
    slower = _ids_by_path(wh)[BERT_H100.resolve()]
    with wh.connect_lake(read_only=True, own_instance=True) as lake_con:
        expected = rows_of(lake_con, "main", "op_best_observed", f"trace_id = '{slower}'")
    assert sum(expected.values()) > 5  # the faster trace is the best observed run of the slower one's ops
    with wh.connect_analysis([slower]) as copy:
        assert rows_of(copy, "main", "op_best_observed") == expected
