"""Every real trace in tests/data/traces analyzed once per session, for the expert tests.

The reports are what a user gets from `tracelake analyze TRACE` with no options (platform from
`deviceProperties`, mode auto); each `ExpertReport` carries the files a reader looks at first
(priority_data.json, analysis.md, metadata/model_info.json, metadata/run.json,
metadata/trace_quality.json) and a read-only connection to the warehouse the analysis wrote its
findings and claims into, for SQL cross-checks.

The two graph-replay serving traces are analyzed a second time with their capture folders
(tests/data/captures/), into a second copy of the warehouse, so that the claims of the plain run
stay as they were.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import DATA, TRACES
from tests.pipeline.conftest import copy_of
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.warehouse import Warehouse

ALL_TRACES = sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz"))
CAPTURES = DATA / "captures"  # graph-capture traces of the serving traces (from ../shared/traces/inference/*/capture_traces)

BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = "mi300/gaunernst_bert-small-uncased__1016001.json.gz"
QWEN_H100 = "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
QWEN_MI300 = "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
TIMESFORMER = "h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"
B200 = "b200/eager_trace.json.gz"
GPU_ONLY = "mi210/gpu_only_trace/gpu_only_trace.json.gz"
COMPILED = "torch_compile_triton/trace.json.gz"
VLLM = "inference/vllm_decode_full/graph_execution.json.gz"
SGLANG = "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"
CAPTURE_FOLDERS = {VLLM: CAPTURES / "inference__vllm_decode_full", SGLANG: CAPTURES / "inference__sglang_decode"}


@dataclass(frozen=True)
class ExpertReport:
    """One analyzed trace: its output files, parsed, and the warehouse holding its claims."""

    relative: str
    out: Path
    trace_id: str
    platform: str
    priority: dict[str, Any]  # priority_data.json
    markdown: str  # analysis.md
    model_info: dict[str, Any]  # metadata/model_info.json
    run: dict[str, Any]  # metadata/run.json
    quality: dict[str, Any]  # metadata/trace_quality.json
    db: duckdb.DuckDBPyConnection

    @property
    def findings(self) -> list[dict[str, Any]]:
        return self.priority["findings"]

    @property
    def e2e_ms(self) -> float:
        return self.priority["e2e_time_ms"]

    def sql(self, query: str, **params: Any) -> list[tuple]:
        """Rows of `query`, whose `$trace_id` is this report's trace and `$<name>` the keyword `name`."""
        bound = {"trace_id": self.trace_id} if "$trace_id" in query else {}
        return self.db.execute(query, {**bound, **params}).fetchall()


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _report(relative: str, out: Path, trace_id: str, platform: str, db: duckdb.DuckDBPyConnection) -> ExpertReport:
    return ExpertReport(
        relative=relative, out=out, trace_id=trace_id, platform=platform,
        priority=_read_json(out / "priority_data.json"),
        markdown=(out / "analysis.md").read_text(),
        model_info=_read_json(out / "metadata" / "model_info.json"),
        run=_read_json(out / "metadata" / "run.json"),
        quality=_read_json(out / "metadata" / "trace_quality.json"),
        db=db,
    )


def _analyze_all(warehouse: Warehouse, out_root: Path, runs: dict[str, AnalyzeOptions]) -> dict[str, tuple[Path, str, str]]:
    done = {}
    for relative, options in runs.items():
        out = out_root / relative.replace("/", "__")
        outcome = run_analysis(TRACES / relative, warehouse, replace(options, out_dir=out))
        done[relative] = (out, outcome.trace_id, outcome.platform)
    return done


@pytest.fixture(scope="session")
def expert_reports(warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ExpertReport]]:
    """Every trace of tests/data/traces analyzed once, standalone, with the default options."""
    copy = copy_of(warehouse, tmp_path_factory, "expert")
    done = _analyze_all(copy, tmp_path_factory.mktemp("expert_reports"),
                        {relative: AnalyzeOptions(jobs=1) for relative in ALL_TRACES})
    con = copy.connect_read_only()
    yield {relative: _report(relative, out, trace_id, platform, con) for relative, (out, trace_id, platform) in done.items()}
    con.close()


@pytest.fixture(scope="session")
def capture_reports(warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ExpertReport]]:
    """The graph-replay serving traces analyzed with their capture folders (`--capture-folder`)."""
    copy = copy_of(warehouse, tmp_path_factory, "expert_capture")
    done = _analyze_all(copy, tmp_path_factory.mktemp("expert_capture_reports"),
                        {relative: AnalyzeOptions(jobs=1, capture_folder=folder)
                         for relative, folder in CAPTURE_FOLDERS.items()})
    con = copy.connect_read_only()
    yield {relative: _report(relative, out, trace_id, platform, con) for relative, (out, trace_id, platform) in done.items()}
    con.close()
