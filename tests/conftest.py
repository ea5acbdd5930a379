"""Shared fixtures: one real warehouse built from every trace in tests/data, once per session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.reports.trace_variants import (
    write_legacy_categories,
    write_model_pipeline,
    write_with_device_name,
    write_with_pause,
    write_with_renamed_launch_flows,
    write_without_launch_flows,
)
from tracelake.ingestion import ingest_paths
from tracelake.lake_catalog import CATALOG_ENV, CLASSIC
from tracelake.warehouse import Warehouse

DATA = Path(__file__).parent / "data"
TRACES = DATA / "traces"
EXPECTED = DATA / "expected"
HTA_TRACES = DATA / "hta"  # flow-less real ranks, outside TRACES (see tests/data/README.md)
CAPTURE_TRACE = DATA / "captures" / "inference__sglang_decode" / "bs_32_rank0.json.gz"  # outside TRACES (README)
LINKING_SOURCE = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
# the same BERT-small forward pass on both vendors, source of the idle-gap mechanism variants
GAP_MECHANISM_SOURCES = ("h100/gaunernst_bert-small-uncased__1016001.json.gz",
                         "mi300/gaunernst_bert-small-uncased__1016001.json.gz")
GAP_CLASS_VARS = yaml.safe_load((Path(__file__).parents[1] / "dbt_project.yml").read_text())["vars"]

# expected/<folder> -> the trace it was computed from
EXPECTED_TRACES = {
    "b200__eager_trace": "b200/eager_trace.json.gz",
    "h100__Qwen_Qwen1.5-0.5B-Chat__1016005": "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "h100__gaunernst_bert-small-uncased__1016001": "h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "h100__facebook_timesformer-base-finetuned-k400__1016002": "h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz",
    "mi210__gpu_only_trace__gpu_only_trace": "mi210/gpu_only_trace/gpu_only_trace.json.gz",
    "mi300__Qwen_Qwen1.5-0.5B-Chat__1016005": "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "mi300__gaunernst_bert-small-uncased__1016001": "mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "mi300__resnet_act_checkpoint": "mi300/resnet_act_checkpoint.json.gz",
    "torch_compile_triton__trace": "torch_compile_triton/trace.json.gz",
    "inference__sglang_decode": "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
    "inference__vllm_decode_full": "inference/vllm_decode_full/graph_execution.json.gz",
}

os.environ["DO_NOT_TRACK"] = "1"


@pytest.fixture(scope="session")
def suite_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """Every trace of tests/data in one warehouse of the classic layout, the one dbt runs on: the
    models' tests query it, and dbt's unit and data tests run on copies of its database file."""
    wh = Warehouse(tmp_path_factory.mktemp("warehouse"))
    report = ingest_paths([TRACES], wh, tags={"suite": "tests"}, jobs=2)
    assert not report.failed, report.failed
    return wh


@pytest.fixture(scope="session")
def warehouse(suite_warehouse: Warehouse) -> Warehouse:
    return suite_warehouse


@dataclass(frozen=True)
class LinkingTraces:
    """The linking warehouse and the folder of the variant traces it holds."""

    warehouse: Warehouse
    variants: Path  # original.json.gz (BERT H100 as is) and its variants, by the names below


@pytest.fixture(scope="session")
def linking_traces(tmp_path_factory: pytest.TempPathFactory) -> LinkingTraces:
    """One small warehouse, built once: BERT H100 and four variants of it written at test time
    (launch flows removed; renamed `async_cpu_to_gpu`; legacy category names; flows and GPU
    correlations removed, so nothing links) and the two flow-less HTA ranks."""
    variants = tmp_path_factory.mktemp("linking_traces")
    source = TRACES / LINKING_SOURCE
    shutil.copyfile(source, variants / "original.json.gz")
    write_without_launch_flows(source, variants / "no_flows.json.gz")
    write_with_renamed_launch_flows(source, variants / "async_cpu_to_gpu_flows.json.gz", "async_cpu_to_gpu")
    write_legacy_categories(source, variants / "legacy_categories.json.gz")
    write_without_launch_flows(source, variants / "unlinkable.json.gz", drop_gpu_correlations=True)
    wh = Warehouse(tmp_path_factory.mktemp("linking_warehouse"))
    report = ingest_paths([variants, HTA_TRACES], wh, tags={"suite": "linking"}, jobs=2)
    assert not report.failed, report.failed
    return LinkingTraces(wh, variants)


@dataclass(frozen=True)
class ScopeTraces:
    """The scope warehouse and its traces: what a trace shows about its workload, model and device."""

    warehouse: Warehouse
    capture: Path  # a real SGLang GPU-graph capture trace (capture calls, no replay)
    in_capture_folder: Path  # the torch.compile trace copied under a capture_traces/ folder
    unknown_device: Path  # BERT H100 with its device renamed 'Foo GPU'
    pipeline: Path  # BERT H100 as a pipeline: T5EncoderModel + SD3Transformer2DModel around its layers


# the variant's pipeline: BERT-small's outer calls removed, its embeddings and first two layers
# under a text encoder, its last two layers and the head under a transformer
PIPELINE_DROPPED = ("BertLMHeadModel_0", "BertModel_0", "BertEncoder_0")
PIPELINE_COMPONENTS = {"T5EncoderModel_0": ("BertEmbeddings_0", "BertLayer_1"),
                       "SD3Transformer2DModel_0": ("BertLayer_2", "BertOnlyMLMHead_0")}


@pytest.fixture(scope="session")
def scope_traces(tmp_path_factory: pytest.TempPathFactory) -> ScopeTraces:
    """One small warehouse, built once, of the traces the workload and model checks are about."""
    folder = tmp_path_factory.mktemp("scope_traces")
    traces = ScopeTraces(
        Warehouse(tmp_path_factory.mktemp("scope_warehouse")), folder / "sglang" / CAPTURE_TRACE.name,
        folder / "capture_traces" / "trace.json.gz", folder / "variants" / "foo_gpu.json.gz",
        folder / "variants" / "pipeline.json.gz")
    for path in (traces.capture, traces.in_capture_folder):
        path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CAPTURE_TRACE, traces.capture)
    shutil.copyfile(TRACES / "torch_compile_triton" / "trace.json.gz", traces.in_capture_folder)
    write_with_device_name(TRACES / LINKING_SOURCE, traces.unknown_device, "Foo GPU")
    write_model_pipeline(TRACES / LINKING_SOURCE, traces.pipeline, PIPELINE_DROPPED, PIPELINE_COMPONENTS)
    report = ingest_paths([folder], traces.warehouse, tags={"suite": "scope"}, jobs=2)
    assert not report.failed, report.failed
    return traces


@pytest.fixture(scope="session")
def scope_db(scope_traces: ScopeTraces) -> duckdb.DuckDBPyConnection:
    con = scope_traces.warehouse.connect_read_only()
    yield con
    con.close()


@pytest.fixture(scope="session")
def linking_db(linking_traces: LinkingTraces) -> duckdb.DuckDBPyConnection:
    con = linking_traces.warehouse.connect_read_only()
    yield con
    con.close()


@pytest.fixture(scope="session")
def db(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    con = warehouse.connect_read_only()
    yield con
    con.close()


@pytest.fixture(scope="session")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """`built_once(trace)`: a warehouse of that one trace, made by `tracelake ingest` once per test
    run. Tests that need a warehouse to change copy it (shutil.copytree; the copy re-points its
    views on first open) instead of paying for a first dbt build each."""
    built: dict[tuple[Path, str | None], Path] = {}

    def build(trace: Path) -> Path:
        key = (trace, os.environ.get(CATALOG_ENV))  # a module of classic_layout gets a classic one
        if key not in built:
            folder = tmp_path_factory.mktemp("built_once") / "wh"
            result = run_cli("ingest", str(trace), "--warehouse", str(folder), "--quiet")
            assert result.returncode == 0, result.stderr
            built[key] = folder
        return built[key]
    return build


@pytest.fixture(scope="module")
def classic_layout() -> Iterator[None]:
    """The module's new warehouses take the classic single-file layout (`--catalog classic`): its
    tests are of that layout's own machinery (copy-and-rename writers, journals, Parquet partitions).
    Use as `pytestmark = pytest.mark.usefixtures("classic_layout")`, before any module fixture."""
    saved = os.environ.get(CATALOG_ENV)
    os.environ[CATALOG_ENV] = CLASSIC
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CATALOG_ENV, None)
        else:
            os.environ[CATALOG_ENV] = saved


def trace_id_of(db: duckdb.DuckDBPyConnection, relative_path: str) -> str:
    path = str((TRACES / relative_path).resolve())
    row = db.execute("select trace_id from traces where source_path = ?", [path]).fetchone()
    assert row is not None, f"{relative_path} not in warehouse"
    return row[0]


def run_cli(*args: str, env: dict[str, str] | None = None, user: int | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "DO_NOT_TRACK": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tracelake", *args],
        capture_output=True,
        text=True,
        env=full_env,
        user=user,
        cwd=cwd,
        timeout=600,
    )


# ---- idle-gap mechanisms -------------------------------------------------------------------------


@dataclass(frozen=True)
class GapMechanisms:
    """A warehouse of BERT-small variants, each staging one cause of an idle gap, and the gap it changed."""

    db: duckdb.DuckDBPyConnection
    gaps: dict[str, tuple[str, int]]  # variant -> (trace_id, gap_id)


def _gap_where(db: duckdb.DuckDBPyConnection, trace: str, condition: str) -> dict:
    cursor = db.execute(f"select * from gpu_idle_gaps where trace_id = ? and {condition} order by duration_us desc limit 1",
                        [trace_id_of(db, trace)])
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


@pytest.fixture(scope="session")
def gap_mechanisms(db: duckdb.DuckDBPyConnection, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GapMechanisms]:
    """Variants written at test time from the real BERT traces (trace_variants.write_with_pause):
    - `returns_early_<vendor>`: the host stops for 10 ms right after its synchronizing call returns
      inside a gap (the call ends microseconds after the gap opens, as on OWLv2);
    - `spans_mi300`: a blocking copy (`hipMemcpyWithStream`) that spans its gap and issued the copy
      closing it, held 500 us longer (the host waits in the call, the GPU for the copy);
    - `queued_h100`: the GPU is held back 5 ms in a mid-trace gap while the host launched on time."""
    folder = tmp_path_factory.mktemp("gap_mechanisms")
    sync_names = ", ".join(f"'{n}'" for n in GAP_CLASS_VARS["synchronizing_runtime_calls"])
    chosen: dict[str, tuple[str, dict, float, bool]] = {}
    for vendor, trace in (("h100", GAP_MECHANISM_SOURCES[0]), ("mi300", GAP_MECHANISM_SOURCES[1])):
        gap = _gap_where(db, trace, "gap_class_reason = 'launched_after_sync_returned'")
        chosen[f"returns_early_{vendor}"] = (trace, gap, (gap["start_runtime_end_us"] + gap["next_launch_ts_us"]) / 2,
                                             False)
    gap = _gap_where(db, GAP_MECHANISM_SOURCES[1], f"start_runtime_name in ({sync_names}) and start_runtime_end_us >= end_us "
                     "and next_launch_event_idx = start_runtime_event_idx")
    chosen["spans_mi300"] = (GAP_MECHANISM_SOURCES[1], gap, (gap["start_us"] + gap["end_us"]) / 2, False)
    gap = _gap_where(db, GAP_MECHANISM_SOURCES[0], "gap_class = 'launch_bound' and gap_id between 20 and 40")
    chosen["queued_h100"] = (GAP_MECHANISM_SOURCES[0], gap, gap["start_us"] + 0.5, True)
    pauses = {"returns_early_h100": 10_000.0, "returns_early_mi300": 10_000.0, "spans_mi300": 500.0,
              "queued_h100": 5_000.0}
    for name, (trace, _, at_us, gpu_only) in chosen.items():
        assert write_with_pause(TRACES / trace, folder / f"{name}.json.gz", at_us, pauses[name], gpu_only) > 0
    wh = Warehouse(tmp_path_factory.mktemp("gap_mechanisms_wh"))
    assert not ingest_paths([folder], wh, tags={"suite": "gap_mechanisms"}, jobs=1).failed
    con = wh.connect_read_only()
    ids = dict(con.execute("select regexp_extract(source_path, '([a-z0-9_]+)\\.json\\.gz$', 1), trace_id from traces").fetchall())
    yield GapMechanisms(con, {name: (ids[name], gap["gap_id"]) for name, (_, gap, _, _) in chosen.items()})
    con.close()
