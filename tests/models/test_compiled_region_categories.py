"""GEMMs launched straight from a compiled region (no `aten::mm` op between the region and the
kernel, as in compiled diffusion transformers) are GEMM time in the tables and CSVs, not `other`:
a compiled-region launcher takes the op category of the kernels that hold most of its time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

COMPILED = TRACES / "torch_compile_triton" / "trace.json.gz"


def _without_mm_ops(source: Path, target: Path) -> None:
    """The compiled trace with its `aten::mm` cpu ops removed: their GEMM kernels' launches are then
    enclosed only by the compiled region's ops."""
    with gzip.open(source, "rt") as handle:
        trace = json.load(handle)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not (e.get("cat") == "cpu_op" and e.get("name") == "aten::mm")]
    with gzip.open(target, "wt") as handle:
        json.dump(trace, handle)


@pytest.fixture(scope="module")
def compiled_db(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("compiled_region")
    _without_mm_ops(COMPILED, folder / "no_mm.json.gz")
    wh = Warehouse(folder / "wh")
    report = ingest_paths([COMPILED, folder / "no_mm.json.gz"], wh, {}, jobs=2)
    assert not report.failed, report.failed
    ids = {o.path.name: o.trace_id for o in report.outcomes}
    with wh.connect_read_only() as db:
        yield db, ids["trace.json.gz"], ids["no_mm.json.gz"]


def test_gemm_kernels_of_a_compiled_region_are_gemm_time(compiled_db) -> None:
    db, original, stripped = compiled_db
    launchers = db.execute(
        """select name, op_category from intermediate.int_kernel_launchers
           where trace_id = ? and list_contains(kernel_names, first_kernel_name) and first_kernel_name in (
               select name from kernels where trace_id = ? and kernel_category = 'GEMM')""", [stripped, stripped]).fetchall()
    assert launchers and all(category == "GEMM" for _, category in launchers), launchers
    assert any(name.startswith(("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph", "TorchDynamo"))
               for name, _ in launchers), launchers

    def gemm_ms(trace_id: str) -> float:
        return db.execute("select total_direct_kernel_time_ms from ops_summary_by_category "
                          "where trace_id = ? and op_category = 'GEMM'", [trace_id]).fetchone()[0]

    assert gemm_ms(stripped) == pytest.approx(gemm_ms(original), rel=1e-6)


def test_ops_that_are_not_compiled_regions_keep_the_tracelens_rules(compiled_db) -> None:
    """The original trace's categories are TraceLens' (tests/reports/test_perf_report.py checks them
    against expected/); here: its compiled region launches no kernel itself."""
    db, original, _ = compiled_db
    region_rows = db.execute(
        """select count(*) from intermediate.int_kernel_launchers where trace_id = ?
           and name like 'Torch-Compiled Region%'""", [original]).fetchone()[0]
    assert region_rows == 0


def test_the_unified_table_counts_them_as_gemm_too(compiled_db) -> None:
    db, original, stripped = compiled_db

    def unified_gemm_us(trace_id: str) -> float:
        return db.execute("select sum(kernel_time_us) from intermediate.int_unified_ops "
                          "where trace_id = ? and op_category = 'GEMM'", [trace_id]).fetchone()[0]

    assert unified_gemm_us(stripped) == pytest.approx(unified_gemm_us(original), rel=1e-6)
