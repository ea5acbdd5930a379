"""GPU work is never dropped without a word: odd category spellings, B/E duration pairs and string
timestamps read as the work they are, and device work in a category TraceLake does not read is
counted, flagged in trace_quality and named in the report (never "a CPU-only trace" or "a
micro-benchmark").

Each variant is a copy of the real BERT-small H100 trace of tests/data written the odd way (the
categories HTA's MTIA and CUPTI-range test traces use, `mtia_ccp_events` / `mtia_runtime` and
`cuda_profiler_range`, are reproduced on it, not copied); the readable variants must give the
original's GPU timeline.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TRACES, run_cli
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

SOURCE = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
TIMELINE = ("computation_time_ms", "exposed_comm_time_ms", "exposed_memcpy_time_ms", "busy_time_ms",
            "idle_time_ms", "total_time_ms")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
PAIRED_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cpu_op", "cuda_runtime", "cuda_driver"}
# spellings seen from other tools and hand-made traces, each of which must read as its current name
KERNEL_SPELLINGS = ("kernel ", "cuda_kernel", "GPU_KERNEL", " Kernel", "concurrent_kernel")


def _load() -> dict[str, Any]:
    return json.loads(gzip.decompress(SOURCE.read_bytes()))


def _write(trace: dict[str, Any], target: Path) -> Path:
    target.write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))
    return target


def _recategorized(target: Path, mapping: dict[str, tuple[str, ...]]) -> Path:
    """Events of each category spelled in turn by its spellings."""
    trace = _load()
    for index, event in enumerate(trace["traceEvents"]):
        spellings = mapping.get(event.get("cat"))
        if spellings:
            event["cat"] = spellings[index % len(spellings)]
    return _write(trace, target)


def _begin_end(target: Path) -> Path:
    """Every host and GPU complete event with a duration written as a B/E pair (the E carrying only
    ph, pid, tid and ts), in time order as a profiler emits them: at one instant ends before begins,
    an inner event's end before its parent's."""
    trace = _load()
    kept, stamped = [], []
    for index, event in enumerate(trace["traceEvents"]):
        if event.get("ph") == "X" and event.get("cat") in PAIRED_CATEGORIES and event.get("dur", 0) > 0:
            begin = {**event, "ph": "B"}
            del begin["dur"]
            end = event["ts"] + event["dur"]
            stamped.append(((event["ts"], 1, -event["dur"], index), begin))
            stamped.append(((end, 0, -event["ts"], index),
                            {"ph": "E", "pid": event["pid"], "tid": event["tid"], "ts": end}))
        else:
            kept.append(event)
    trace["traceEvents"] = kept + [event for _, event in sorted(stamped, key=lambda pair: pair[0])]
    return _write(trace, target)


def _string_numbers(target: Path) -> Path:
    trace = _load()
    for event in trace["traceEvents"]:
        for key in ("ts", "dur"):
            if isinstance(event.get(key), (int, float)):
                event[key] = repr(event[key])
    return _write(trace, target)


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, dict[str, Path]]:
    folder = tmp_path_factory.mktemp("gpu_variants")
    paths = {
        "original": _write(_load(), folder / "original.json.gz"),
        "spellings": _recategorized(folder / "spellings.json.gz", {
            "kernel": KERNEL_SPELLINGS, "gpu_memcpy": (" gpu_memcpy", "Memcpy"), "cuda_runtime": ("CUDA_RUNTIME ",)}),
        "mtia": _recategorized(folder / "mtia.json.gz", {"kernel": ("mtia_ccp_events",),
                                                         "cuda_runtime": ("mtia_runtime",)}),
        "begin_end": _begin_end(folder / "begin_end.json.gz"),
        "string_numbers": _string_numbers(folder / "string_numbers.json.gz"),
        "cupti_range": _recategorized(folder / "cupti_range.json.gz", dict.fromkeys(GPU_CATEGORIES, ("cuda_profiler_range",))),
        "unknown_gpu": _recategorized(folder / "unknown_gpu.json.gz", {"gpu_memcpy": ("dma_copy_engine",)}),
    }
    wh = Warehouse(tmp_path_factory.mktemp("gpu_variants_warehouse"))
    report = ingest_paths(list(paths.values()), wh, tags={"suite": "gpu-variants"}, jobs=2)
    assert not report.failed, report.failed
    return wh, paths


def _timeline(wh: Warehouse, path: Path) -> tuple[float, ...]:
    with wh.connect_read_only() as con:
        row = con.execute(f"select {', '.join(TIMELINE)} from gpu_timeline join traces using (trace_id) "
                          "where source_path = ?", [str(path.resolve())]).fetchone()
    assert row is not None
    return tuple(row)


def _checks(wh: Warehouse, path: Path) -> dict[str, tuple[float, str, str]]:
    with wh.connect_read_only() as con:
        rows = con.execute("select check_name, value, verdict, detail from trace_quality join traces using (trace_id) "
                           "where source_path = ?", [str(path.resolve())]).fetchall()
    return {name: (value, verdict, detail) for name, value, verdict, detail in rows}


@pytest.mark.parametrize("variant", ["spellings", "mtia", "begin_end", "string_numbers"])
def test_readable_variants_give_the_original_timeline(variants: tuple[Warehouse, dict[str, Path]], variant: str) -> None:
    wh, paths = variants
    original, read = _timeline(wh, paths["original"]), _timeline(wh, paths[variant])
    assert original[TIMELINE.index("busy_time_ms")] > 0
    assert read == pytest.approx(original, abs=1e-6)  # to the ns
    checks = _checks(wh, paths[variant])
    assert checks["unrecognized_device_events"][:2] == (0.0, "pass")
    assert checks["gpu_events_present"][1] == "pass"


def test_begin_end_pairs_are_counted(variants: tuple[Warehouse, dict[str, Path]]) -> None:
    wh, paths = variants
    value, verdict, detail = _checks(wh, paths["begin_end"])["begin_end_events"]
    written = sum(1 for event in _load()["traceEvents"]
                  if event.get("ph") == "X" and event.get("cat") in PAIRED_CATEGORIES and event.get("dur", 0) > 0)
    assert (value, verdict) == (written, "info") and "no partner" not in detail
    with wh.connect_read_only() as con:
        counts = [con.execute("select count(*), count(*) filter (where is_linked) from kernels join traces "
                              "using (trace_id) where source_path = ?", [str(paths[name].resolve())]).fetchone()
                  for name in ("original", "begin_end")]
    assert counts[0] == counts[1]  # every kernel read, and linked to its launch


def test_string_numbers_are_counted(variants: tuple[Warehouse, dict[str, Path]]) -> None:
    wh, paths = variants
    value, verdict, detail = _checks(wh, paths["string_numbers"])["repaired_values"]
    assert value > 0 and verdict == "warn" and "number_from_string" in detail


def test_unread_device_work_is_flagged_not_called_cpu_only(variants: tuple[Warehouse, dict[str, Path]]) -> None:
    wh, paths = variants
    checks = _checks(wh, paths["cupti_range"])
    value, verdict, detail = checks["unrecognized_device_events"]
    gpu_events = sum(1 for event in _load()["traceEvents"] if event.get("cat") in GPU_CATEGORIES)
    assert (value, verdict) == (gpu_events, "fail") and f"'cuda_profiler_range' ({gpu_events})" in detail
    _, verdict, detail = checks["gpu_events_present"]
    assert verdict == "fail" and "CPU-only" not in detail and "'cuda_profiler_range'" in detail
    assert "micro-benchmark" not in checks["gpu_busy_share"][2]
    # some device work read, some not: a warning naming the unread spelling
    value, verdict, detail = _checks(wh, paths["unknown_gpu"])["unrecognized_device_events"]
    assert value > 0 and verdict == "warn" and "'dma_copy_engine'" in detail


def test_report_names_unread_device_work(variants: tuple[Warehouse, dict[str, Path]], tmp_path: Path) -> None:
    _, paths = variants
    out = tmp_path / "report"
    result = run_cli("analyze", str(paths["cupti_range"]), "--warehouse", str(tmp_path / "wh"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    markdown = (out / "analysis.md").read_text()
    assert "CPU-only" not in markdown and "micro-benchmark" not in markdown
    assert "cuda_profiler_range" in markdown
