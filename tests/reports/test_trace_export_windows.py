"""`tracelake export` of a step, a time window and a never-analyzed trace (issue 28): a step holds its
host side and the GPU work it launched, a window holds the host side of its GPU work, flows come
whole, and the source's metadata goes back out, so an exported trace ingests as the same device with
the same roofline."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tracelake.lakehouse import open_warehouse

RESNET = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"
BERT_H100 = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
FINDINGS_PID = "TraceLake findings"
MIN_LAUNCHED_GPU_SHARE = 0.95  # issue 28: re-ingested, a step's GPU time has its launches (5 % before the fix)
GEMM_ROOFLINE_SQL = ("select platform, name, input_dims, gflops, data_moved_mib, roofline_time_us, roofline_bound, "
                     "kernel_time_sum_us, pct_roofline_mean from gemm_ops where is_trace_platform order by all")


def _db(warehouse: Path) -> duckdb.DuckDBPyConnection:
    return open_warehouse(warehouse).connect_read_only()


def _trace_id(warehouse: Path) -> str:
    with _db(warehouse) as db:
        return db.execute("select trace_id from traces").fetchone()[0]


def _export(warehouse: Path, out: Path, *args: str) -> dict:
    result = run_cli("export", _trace_id(warehouse), *args, "--out", str(out), "--warehouse", str(warehouse))
    assert result.returncode == 0, result.stderr
    return json.loads(gzip.decompress(out.read_bytes()) if out.name.endswith(".gz") else out.read_text())


def _reingest(trace: Path, warehouse: Path) -> None:
    result = run_cli("ingest", str(trace), "--warehouse", str(warehouse), "--quiet")
    assert result.returncode == 0, result.stderr


def _launched_gpu_share(warehouse: Path) -> float:
    with _db(warehouse) as db:
        return db.execute("select sum(dur_us) filter (where is_linked) / sum(dur_us) from kernels").fetchone()[0]


def _own(document: dict) -> list[dict]:
    return [e for e in document["traceEvents"] if e["pid"] != FINDINGS_PID and e["ph"] != "M"]


def _flow_ends(events: list[dict]) -> tuple[set, set]:
    return {e["id"] for e in events if e["ph"] == "s"}, {e["id"] for e in events if e["ph"] == "f"}


def test_export_before_any_analysis_writes_the_trace_and_refuses_a_finding(built_once: Callable[[Path], Path],
                                                                          tmp_path: Path) -> None:
    warehouse = built_once(BERT_H100)
    document = _export(warehouse, tmp_path / "whole.json")
    assert any(e.get("cat") == "kernel" for e in document["traceEvents"])
    out = tmp_path / "p1.json"
    refused = run_cli("export", _trace_id(warehouse), "--finding", "P1", "--out", str(out), "--warehouse", str(warehouse))
    assert refused.returncode == 2 and not out.exists()
    assert "has no findings yet" in refused.stderr and "tracelake analyze" in refused.stderr
    assert refused.stderr.strip().count("\n") == 0 and "Traceback" not in refused.stderr


def test_an_exported_trace_keeps_every_top_level_key_and_ingests_as_the_same_device(
        built_once: Callable[[Path], Path], tmp_path: Path) -> None:
    warehouse = built_once(BERT_H100)
    source = json.loads(gzip.decompress(BERT_H100.read_bytes()))
    document = _export(warehouse, tmp_path / "whole.json.gz")
    header = {key: value for key, value in source.items() if key != "traceEvents"}
    assert {"deviceProperties", "baseTimeNanoseconds", "cuda_runtime_version", "traceName", "schemaVersion"} <= set(header)
    # equal, but for the one secret ingest masked (ingest/metadata.py): an export never carries it back out
    token = header["metadata"]["system"]["env"]["HF_TOKEN"]
    assert document["metadata"]["system"]["env"]["HF_TOKEN"] == "***"
    masked = json.loads(json.dumps(header).replace(token, "***"))
    assert {key: document.get(key) for key in header} == masked
    _reingest(tmp_path / "whole.json.gz", tmp_path / "again")
    with _db(tmp_path / "again") as db:
        assert db.execute("select platform, platform_detected from traces").fetchone() == ("H100", True)
        again = db.execute(GEMM_ROOFLINE_SQL).fetchall()
    with _db(warehouse) as db:
        before = db.execute(GEMM_ROOFLINE_SQL).fetchall()
    assert len(before) > 0 and {row[0] for row in before} == {"H100"}
    assert again == before


def test_a_step_export_holds_its_host_side_and_the_gpu_work_it_launched(built_once: Callable[[Path], Path],
                                                                        tmp_path: Path) -> None:
    warehouse = built_once(RESNET)
    document = _export(warehouse, tmp_path / "step16.json.gz", "--step", "16")
    own = _own(document)
    with _db(warehouse) as db:
        kernel_count, gpu_start_us, gpu_time_ms = db.execute(
            "select kernel_count, gpu_start_us, gpu_time_ms from profiler_steps where step_number = 16").fetchone()
    steps = sorted(e["name"] for e in own if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#16"]  # its host side, not the next step's that ran while its GPU work did
    gpu = [e for e in own if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    # its GPU side, not step 15's kernels still running when step 16's host side began
    assert min(e["ts"] for e in gpu) == pytest.approx(gpu_start_us)
    assert max(e["ts"] + e["dur"] for e in gpu) == pytest.approx(gpu_start_us + 1000 * gpu_time_ms)
    starts, ends = _flow_ends(own)
    assert starts == ends and len(starts) >= kernel_count
    source = json.loads(gzip.decompress(RESNET.read_bytes()))
    assert {key: document[key] for key in source if key != "traceEvents"} == {
        key: value for key, value in source.items() if key != "traceEvents"}
    _reingest(tmp_path / "step16.json.gz", tmp_path / "again")
    assert _launched_gpu_share(tmp_path / "again") >= MIN_LAUNCHED_GPU_SHARE
    with _db(tmp_path / "again") as db:
        assert db.execute("select platform from traces").fetchone() == ("MI300X",)
        again_count, again_time_ms = db.execute(
            "select kernel_count, gpu_time_ms from profiler_steps where step_number = 16").fetchone()
    assert again_count >= kernel_count and again_time_ms == pytest.approx(gpu_time_ms, abs=1e-3)


def test_a_window_of_gpu_time_holds_the_host_side_that_launched_it(built_once: Callable[[Path], Path],
                                                                   tmp_path: Path) -> None:
    """The resnet GPU runs ~30 ms behind its host: the host events at the time of a GPU window are a
    later step's; the export adds the calls (and their cpu_op stacks) that launched the window's work."""
    warehouse = built_once(RESNET)
    with _db(warehouse) as db:
        start, host_end = db.execute("select gpu_start_us + 5000, host_start_us + 1000 * host_time_ms "
                                     "from profiler_steps where step_number = 16").fetchone()
    document = _export(warehouse, tmp_path / "window.json", "--window", f"{start}:{start + 2000}")
    own = _own(document)
    gpu = [e for e in own if e.get("cat") == "kernel"]
    launches = [e for e in own if e.get("cat") == "cuda_runtime" and e["ts"] < host_end]
    assert gpu and len(launches) >= len(gpu) * 0.95  # launched during step 16's host span, 20+ ms before the window
    assert any(e.get("cat") == "cpu_op" and e["ts"] + e["dur"] < start for e in own)
    starts, ends = _flow_ends(own)
    assert starts == ends and starts
    _reingest(tmp_path / "window.json", tmp_path / "again")
    assert _launched_gpu_share(tmp_path / "again") >= MIN_LAUNCHED_GPU_SHARE


def test_the_critical_path_overlay_marks_the_step_chain_and_links_it(built_once: Callable[[Path], Path],
                                                                     tmp_path: Path) -> None:
    """HTA users overlay the critical path on the trace: `--critical-path` marks each exported node of
    `critical_path` and draws an arrow from its binding predecessor, so Perfetto shows the chain."""
    warehouse = built_once(RESNET)
    own = _own(_export(warehouse, tmp_path / "path.json", "--step", "16", "--critical-path"))
    with _db(warehouse) as db:
        nodes = db.execute(
            "select count(*), max(c.end_us) from critical_path c join profiler_steps p using (trace_id, step_number) "
            "where step_number = 16 and c.ts_us >= p.gpu_start_us").fetchone()
        gpu_end_us = db.execute("select gpu_start_us + 1000 * gpu_time_ms from profiler_steps where step_number = 16"
                                ).fetchone()[0]
    marked = [e for e in own if "critical_path" in e.get("args", {})]
    # the step's path ends at its last GPU event; its nodes before the step's GPU span are step 15's kernels
    # (the GPU-bound stream chains back into them), not in this export
    assert len(marked) == nodes[0] > 100 and {e["args"]["critical_path"]["step"] for e in marked} == {16}
    assert max(e["ts"] + e["dur"] for e in marked) == pytest.approx(nodes[1]) == pytest.approx(gpu_end_us)
    links = [e for e in own if e.get("cat") == "tracelake.critical_path"]
    starts, ends = _flow_ends(links)
    assert starts == ends and len(starts) == len(marked) - 1  # one chain: every exported node but the first
    assert {(e["pid"], e["tid"], e["ts"]) for e in links if e["ph"] == "f"} <= {(e["pid"], e["tid"], e["ts"]) for e in marked}
    plain = _own(_export(warehouse, tmp_path / "plain.json", "--step", "16"))
    assert not any("critical_path" in e.get("args", {}) for e in plain)
