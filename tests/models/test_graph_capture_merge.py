"""The graph-capture merge (issue 14): the replayed kernels of the vLLM and SGLang decode traces take
the op, shapes and module chain of the launch their capture trace recorded, while the replay's own
timeline stays as measured. Checked against TraceLens' inference-mode CSVs, made with the same
capture folders (../shared/traces/inference/*/perf_csvs, copied to tests/data/expected/inference__*)."""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from tests.conftest import DATA, TRACES, run_cli
from tracelake.graph_captures import read_capture_folder
from tracelake.ingestion import ingest_paths
from tracelake.lakehouse import open_warehouse
from tracelake.warehouse import Warehouse

CAPTURES = DATA / "captures"
EXPECTED = DATA / "expected"  # inference__<name>: TraceLens' perf_csvs of ../shared/traces/inference/<name>
VLLM = TRACES / "inference" / "vllm_decode_full" / "graph_execution.json.gz"
SGLANG = TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz"
CAPTURE_FOLDER = {VLLM: CAPTURES / "inference__vllm_decode_full", SGLANG: CAPTURES / "inference__sglang_decode"}
REPLAYED_EVENTS = {VLLM: 421, SGLANG: 544}  # GPU events each trace's one graph launch ran (by correlation)


@dataclass(frozen=True)
class Merged:
    warehouse: Warehouse
    db: duckdb.DuckDBPyConnection
    ids: dict[Path, str]


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Merged]:
    wh = Warehouse(tmp_path_factory.mktemp("capture_merge"))
    captures = {trace: read_capture_folder(folder) for trace, folder in CAPTURE_FOLDER.items()}
    report = ingest_paths(list(CAPTURE_FOLDER), wh, {}, jobs=2, captures=captures)
    assert not report.failed, report.failed
    ids = {o.path: o.trace_id or "" for o in report.outcomes}
    with wh.connect_read_only() as db:
        yield Merged(wh, db, ids)


def _tracelens_csv(trace: Path, name: str) -> list[dict[str, str]]:
    with (EXPECTED / f"inference__{trace.parent.name}" / name).open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("trace", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_every_replayed_kernel_maps_to_its_captured_launch_in_order(merged: Merged, trace: Path) -> None:
    trace_id = merged.ids[trace]
    rows = merged.db.execute(
        """select count(*), count(distinct gpu_event_idx), min(match_method), max(match_method),
                  count(*) filter (where kernel_ordinal <> dispatch_ordinal)
           from graph_kernel_map where trace_id = ?""", [trace_id]).fetchone()
    assert rows == (REPLAYED_EVENTS[trace], REPLAYED_EVENTS[trace], "position", "position", 0)
    # the kernel a captured launch names is the kernel the replay ran
    mismatched = merged.db.execute(
        """select count(*) from graph_kernel_map
           join events on events.trace_id = graph_kernel_map.capture_trace_id
                and events.event_idx = graph_kernel_map.dispatch_event_idx
           where graph_kernel_map.trace_id = ? and json_extract_string(events.args, '$.kernel') <> kernel_name""",
        [trace_id]).fetchone()[0]
    assert mismatched == 0


@pytest.mark.parametrize("trace", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_replayed_kernels_take_the_captured_op_shapes_and_modules(merged: Merged, trace: Path) -> None:
    trace_id = merged.ids[trace]
    by_method = dict(merged.db.execute(
        "select link_method, count(*) from kernels where trace_id = ? group by 1", [trace_id]).fetchall())
    assert by_method["graph_capture"] == REPLAYED_EVENTS[trace]
    unattributed = merged.db.execute(
        """select count(*) from kernels k
           left join intermediate.int_kernel_launchers l on k.trace_id = l.trace_id and k.launcher_event_idx = l.launcher_event_idx
           where k.trace_id = ? and k.link_method = 'graph_capture' and not k.is_comm
             and (l.name is null or l.name like '%GraphLaunch')""", [trace_id]).fetchone()[0]
    assert unattributed == 0
    shaped = merged.db.execute(
        """select count(*), count(*) filter (where input_dims is not null and len(module_chain) > 0)
           from intermediate.int_kernel_launchers where trace_id = ? and name = 'aten::mm'""", [trace_id]).fetchone()
    assert shaped[0] > 0 and shaped[0] == shaped[1]


@pytest.mark.parametrize("trace", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_the_replay_timeline_stays_as_measured_and_equals_tracelens(merged: Merged, trace: Path) -> None:
    expected = {r["type"]: float(r["time ms"]) for r in _tracelens_csv(trace, "gpu_timeline.csv")}
    row = merged.db.execute("select * from gpu_timeline where trace_id = ?", [merged.ids[trace]]).fetchone()
    columns = [d[0] for d in merged.db.description]
    got = dict(zip(columns, row))
    for kind, value in expected.items():
        assert got[f"{kind}_ms"] == pytest.approx(value, rel=1e-3, abs=1e-6), kind


@pytest.mark.parametrize("trace", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_gemm_rows_match_tracelens_unified_perf_summary(merged: Merged, trace: Path) -> None:
    """Each GEMM row of TraceLens' unified table has ours: the serving wrapper's name (aiter /
    vLLM GEMM ops, modelled with the weight as [N, K]), its shapes, count, kernel time and FLOPs."""
    def canonical(dims: str) -> str:
        return dims.replace("(", "[").replace(")", "]").replace(" ", "").replace(",]", "]")

    expected = sorted((r["name"], canonical(r["Input Dims"]), int(r["operation_count"]),
                       float(r["Kernel Time (µs)_sum"]), float(r["GFLOPS"]))
                      for r in _tracelens_csv(trace, "unified_perf_summary.csv") if r["op category"] == "GEMM")
    got = merged.db.execute(
        """select name, input_dims, operation_count, kernel_time_sum_us, gflops from op_perf
           where trace_id = ? and op_category = 'GEMM' and is_trace_platform order by all""",
        [merged.ids[trace]]).fetchall()
    assert [(name, dims, count) for name, dims, count, _, _ in sorted(got)] == [e[:3] for e in expected]
    for row, want in zip(sorted(got), expected):
        assert row[3:] == pytest.approx(want[3:], rel=1e-3), want[:2]


@pytest.mark.parametrize("trace", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_capture_traces_are_tagged_as_captures_of_the_replay(merged: Merged, trace: Path) -> None:
    listed = merged.db.execute("select graph_capture_trace_ids from staging.stg_trace__files where trace_id = ?",
                               [merged.ids[trace]]).fetchone()[0]
    capture = next(p for p in merged.ids if p.parent == CAPTURE_FOLDER[trace] and p.suffix == ".gz")
    assert listed == [merged.ids[capture]]
    details = json.loads((CAPTURE_FOLDER[trace] / "execution_details.json").read_text())[0]
    tagged = merged.db.execute("select graph_capture_batch_size, graph_capture_mode from staging.stg_trace__files "
                               "where trace_id = ?", [merged.ids[capture]]).fetchone()
    assert tagged == (details["batch_size"], details["mode"])
    # analyzed on its own, a capture is flagged as one, not reported as the workload
    verdict = merged.db.execute("select verdict from trace_quality where trace_id = ? and check_name = 'graph_capture'",
                                [merged.ids[capture]]).fetchone()[0]
    assert verdict == "warn"
    replay = merged.db.execute("select verdict, detail from trace_quality where trace_id = ? "
                               "and check_name = 'graph_replay'", [merged.ids[trace]]).fetchone()
    assert replay[0] == "info" and f"{REPLAYED_EVENTS[trace]} of {REPLAYED_EVENTS[trace]}" in replay[1]


def test_a_replay_ingested_alone_is_remodelled_when_its_captures_come(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    first = ingest_paths([SGLANG], wh, {}, jobs=1)
    assert not first.failed
    trace_id = first.outcomes[0].trace_id
    with wh.connect_read_only() as db:
        assert db.execute("select count(*) from graph_kernel_map where trace_id = ?", [trace_id]).fetchone()[0] == 0
    second = ingest_paths([SGLANG], wh, {}, jobs=1, captures={SGLANG: read_capture_folder(CAPTURE_FOLDER[SGLANG])})
    assert not second.failed
    with wh.connect_read_only() as db:
        mapped = db.execute("select count(*) from kernels where trace_id = ? and link_method = 'graph_capture'",
                            [trace_id]).fetchone()[0]
    assert mapped == REPLAYED_EVENTS[SGLANG]


def test_a_folder_ingest_links_capture_traces_to_their_sibling(tmp_path: Path) -> None:
    folder = tmp_path / "sglang"
    shutil.copytree(CAPTURE_FOLDER[SGLANG], folder / "capture_traces")
    shutil.copyfile(SGLANG, folder / SGLANG.name)
    wh = Warehouse(tmp_path / "wh")
    report = ingest_paths([folder], wh, {}, jobs=1)
    assert not report.failed
    replay_id = next(o.trace_id for o in report.outcomes if o.path.name == SGLANG.name)
    with wh.connect_read_only() as db:
        mapped = db.execute("select count(*) from graph_kernel_map where trace_id = ?", [replay_id]).fetchone()[0]
    assert mapped == REPLAYED_EVENTS[SGLANG]


@pytest.mark.parametrize(("details", "message"), [
    ("{not json", "not readable JSON"),
    ("[]", "non-empty list"),
    ('[{"batch_size": 32}]', 'no "file" name'),
    ('[{"file": "missing.json.gz", "batch_size": 32, "mode": "FULL"}]', "not in the capture folder"),
    ('[{"file": "bs_32_rank0.json.gz", "batch_size": "32", "mode": "FULL"}]', "not a positive whole number"),
    ('[{"file": "bs_32_rank0.json.gz", "batch_size": 32, "mode": "HALF"}]', "neither FULL nor PIECEWISE"),
])
def test_a_bad_capture_folder_is_refused_in_one_line(tmp_path: Path, details: str, message: str) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    shutil.copyfile(CAPTURE_FOLDER[SGLANG] / "bs_32_rank0.json.gz", folder / "bs_32_rank0.json.gz")
    (folder / "execution_details.json").write_text(details)
    result = run_cli("analyze", str(SGLANG), "--capture-folder", str(folder), "--warehouse", str(tmp_path / "wh"),
                     "--out", str(tmp_path / "out"))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_an_empty_capture_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "captures"
    folder.mkdir()
    result = run_cli("analyze", str(SGLANG), "--capture-folder", str(folder), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode != 0 and "holds no .json or .json.gz trace files" in result.stderr


def test_capture_folder2_merges_the_compare_trace(tmp_path: Path) -> None:
    """--capture-folder2 does for the --compare trace what --capture-folder does for trace 1."""
    from tracelake.pipeline import AnalyzeOptions, run_analysis  # noqa: PLC0415 - the pipeline only here

    options = AnalyzeOptions(jobs=2, compare=SGLANG, capture_folder=CAPTURE_FOLDER[VLLM],
                             capture_folder2=CAPTURE_FOLDER[SGLANG], out_dir=tmp_path / "out")
    outcome = run_analysis(VLLM, Warehouse(tmp_path / "wh"), options)
    for name, trace in (("trace_quality.json", VLLM), ("trace2_quality.json", SGLANG)):
        gate = json.loads((outcome.out_dir / "metadata" / name).read_text())
        replay = next(c for c in gate["checks"] if c["check_name"] == "graph_replay")
        assert replay["verdict"] == "info" and f"{REPLAYED_EVENTS[trace]} of {REPLAYED_EVENTS[trace]}" in replay["detail"]
        assert gate["graph_replay_without_capture"] is False


@pytest.mark.parametrize(("trace", "family"), [(VLLM, "GPT-OSS"), (SGLANG, "Qwen3")], ids=["vllm", "sglang"])
def test_the_model_is_named_from_the_captured_modules(merged: Merged, trace: Path, family: str) -> None:
    """The replay records module frames only around the sampler; the captured ops carry the model's."""
    from tracelake.analyzers.model_id import identify_model  # noqa: PLC0415

    info = identify_model(merged.db, merged.ids[trace])
    assert info.model_family == family, info.evidence


# ---- graph-capture tags re-model (issue 27, item 5) -------------------------------------------------

def _capture_id(merged: Merged, replay: Path) -> str:
    return next(trace_id for path, trace_id in merged.ids.items() if path.parent.name == CAPTURE_FOLDER[replay].name)


def _mapping(folder: Path, replay_id: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """(graph_kernel_map rows of the replay, its kernels' attribution: link method, capture, count)."""
    with open_warehouse(folder).connect_read_only() as db:
        kernel_map = db.execute("select * exclude (trace_id) from graph_kernel_map where trace_id = ? "
                                "order by gpu_event_idx", [replay_id]).fetchall()
        attribution = db.execute("select link_method, capture_trace_id, count(*) from kernels where trace_id = ? "
                                 "group by all order by all", [replay_id]).fetchall()
    return kernel_map, attribution


def _tag(folder: Path, *args: str) -> None:
    result = run_cli("tag", *args, "--warehouse", str(folder))
    assert result.returncode == 0, result.stderr


def test_retagging_the_capture_list_re_models_the_replay(merged: Merged, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(merged.warehouse.root, folder)
    replay, own, other = merged.ids[SGLANG], _capture_id(merged, SGLANG), _capture_id(merged, VLLM)
    linked = _mapping(folder, replay)
    assert len(linked[0]) == REPLAYED_EVENTS[SGLANG] and ("graph_capture", own, REPLAYED_EVENTS[SGLANG]) in linked[1]

    _tag(folder, replay, "--remove", "graph_capture_traces")  # names no capture: no kernel keeps one
    kernel_map, attribution = _mapping(folder, replay)
    assert kernel_map == [] and all(method != "graph_capture" and capture is None for method, capture, _ in attribution)

    _tag(folder, replay, f"graph_capture_traces={other}")  # another replay's capture: nothing of its own
    kernel_map, attribution = _mapping(folder, replay)
    assert {row[0] for row in kernel_map} <= {other} and own not in {capture for _, capture, _ in attribution}

    _tag(folder, replay, f"graph_capture_traces={own}")  # back: the rows of the folder ingest
    assert _mapping(folder, replay) == linked


def test_a_capture_linked_by_tag_alone_merges_like_a_folder_ingest(merged: Merged, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    capture_file = next(CAPTURE_FOLDER[SGLANG].glob("*.json.gz"))
    ingested = run_cli("ingest", str(SGLANG), str(capture_file), "--warehouse", str(folder), "--quiet")
    assert ingested.returncode == 0, ingested.stderr
    replay, capture = merged.ids[SGLANG], _capture_id(merged, SGLANG)
    assert _mapping(folder, replay)[0] == []
    _tag(folder, replay, f"graph_capture_traces={capture}")
    linked = _mapping(folder, replay)
    assert linked[1] == _mapping(merged.warehouse.root, replay)[1]
    with open_warehouse(folder).connect_read_only() as db:  # the capture's annotation's mode
        assert db.execute("select distinct capture_mode from graph_kernel_map where trace_id = ?", [replay]).fetchall() == [("DECODE",)]
    # execution_details.json's batch size and mode, tagged on the capture: its replay is re-modelled
    _tag(folder, capture, "graph_capture_batch_size=32", "graph_capture_mode=full")
    assert _mapping(folder, replay) == _mapping(merged.warehouse.root, replay)


def test_build_models_the_capture_tags_as_they_are(merged: Merged, tmp_path: Path) -> None:
    """A warehouse whose replay lost its capture list without a re-model (as an older `tag` left it):
    `tracelake build` models the replay from its tags."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "wh"
    shutil.copytree(merged.warehouse.root, folder)
    replay = merged.ids[SGLANG]
    tag_file = next((folder / "parquet" / "trace_files" / f"trace_id={replay}").glob("*.parquet"))
    table = pq.read_table(tag_file)
    tags = [(k, v) for k, v in table.column("tags")[0].as_py() if k != "graph_capture_traces"]
    index = table.schema.get_field_index("tags")
    pq.write_table(table.set_column(index, table.schema.field("tags"),
                                    pa.array([tags], type=table.schema.field("tags").type)), tag_file)
    assert len(_mapping(folder, replay)[0]) == REPLAYED_EVENTS[SGLANG]  # stale
    built = run_cli("build", "--warehouse", str(folder), "--quiet")
    assert built.returncode == 0, built.stderr
    assert _mapping(folder, replay)[0] == []


@pytest.mark.parametrize(("tag", "message"), [
    ("graph_capture_traces=deadbeefdeadbeef", "is not the full id of a trace in the warehouse"),
    ("graph_capture_batch_size=0", "is not a positive whole number"),
    ("graph_capture_mode=half", "neither FULL nor PIECEWISE"),
])
def test_a_bad_capture_tag_is_refused_in_one_line(merged: Merged, tag: str, message: str) -> None:
    result = run_cli("tag", merged.ids[SGLANG], tag, "--warehouse", str(merged.warehouse.root))
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
