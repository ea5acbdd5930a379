"""GEMMs launched straight from a compiled region (no `aten::mm` op between the region and the
kernel, as in compiled diffusion transformers) are GEMM time in the tables and CSVs, not `other`;
and a compiled region that launches GEMMs, Triton kernels and attention itself
(tests/data/compiled_region, built from the real compiled trace) counts each kernel under its own
category in every category table and CSV, not the whole region under its dominant category (the
FLUX trace's ops_summary_by_category put 171 ms, 38.8 ms of it Triton and 13.5 ms attention, under
GEMM while the report body split them)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import TRACES
from tracelake.ingestion import ingest_paths
from tracelake.reports import perf_report
from tracelake.warehouse import Warehouse

COMPILED = TRACES / "torch_compile_triton" / "trace.json.gz"
REGION_LAUNCHES = Path(__file__).parents[1] / "data" / "compiled_region" / "compiled_region_launches.json.gz"
# the kernels' own op categories: the compiled trace's 7 GEMMs, one attention kernel, 4 Triton kernels
OWN_CATEGORIES = {"GEMM": 7, "SDPA_fwd": 1, "triton": 4}


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
    report = ingest_paths([COMPILED, folder / "no_mm.json.gz", REGION_LAUNCHES], wh, {}, jobs=2)
    assert not report.failed, report.failed
    ids = {o.path.name: o.trace_id for o in report.outcomes}
    with wh.connect_read_only() as db:
        yield db, ids["trace.json.gz"], ids["no_mm.json.gz"], ids[REGION_LAUNCHES.name]


def test_gemm_kernels_of_a_compiled_region_are_gemm_time(compiled_db) -> None:
    db, original, stripped, _ = compiled_db
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
    db, original, _, _ = compiled_db
    region_rows = db.execute(
        """select count(*) from intermediate.int_kernel_launchers where trace_id = ?
           and name like 'Torch-Compiled Region%'""", [original]).fetchone()[0]
    assert region_rows == 0


def test_the_unified_table_counts_them_as_gemm_too(compiled_db) -> None:
    db, original, stripped, _ = compiled_db

    def unified_gemm_us(trace_id: str) -> float:
        return db.execute("select sum(kernel_time_us) from intermediate.int_unified_ops "
                          "where trace_id = ? and op_category = 'GEMM'", [trace_id]).fetchone()[0]

    assert unified_gemm_us(stripped) == pytest.approx(unified_gemm_us(original), rel=1e-6)


def _category_ms(db, mart: str, trace_id: str, time_column: str = "total_direct_kernel_time_ms",
                 category_column: str = "op_category") -> dict[str, float]:
    rows = db.execute(f"select {category_column}, sum({time_column}) from {mart} where trace_id = ? group by all",
                      [trace_id]).fetchall()
    return {category: ms for category, ms in rows}


def _kernel_ms_by_own_category(db, trace_id: str) -> dict[str, float]:
    """The kernels' time by their kernel category, named as the op categories the summaries use."""
    rows = db.execute("""select case kernel_category when 'SDPA' then 'SDPA_fwd' else kernel_category end,
                                sum(dur_us) / 1000.0, count(*)
                         from kernels where trace_id = ? and is_linked and not is_comm group by all""",
                      [trace_id]).fetchall()
    assert {category: count for category, _, count in rows} == OWN_CATEGORIES, rows
    return {category: ms for category, ms, _ in rows}


def test_a_region_launching_gemm_triton_and_attention_is_split_by_kernel_category(compiled_db) -> None:
    db, original, _, region = compiled_db
    # the synthetic trace has what it is built for: one region, the only launcher of all 12 kernels
    launchers = db.execute("select name, kernel_count from intermediate.int_kernel_launchers where trace_id = ?",
                           [region]).fetchall()
    assert launchers == [("Torch-Compiled Region: 0/0", 12)], launchers
    expected = _kernel_ms_by_own_category(db, region)
    assert expected["GEMM"] < 0.7 * sum(expected.values())  # what the dominant category used to take: all
    by_category = _category_ms(db, "ops_summary_by_category", region)
    assert by_category == pytest.approx(expected, rel=1e-6)
    # the real trace, whose ops sit between the region and its kernels, says the same for GEMM and
    # Triton (its attention kernel's op, `aten::_flash_attention_forward`, is TraceLens' `other`)
    real = _category_ms(db, "ops_summary_by_category", original)
    assert {c: real[c] for c in ("GEMM", "triton")} == pytest.approx({c: expected[c] for c in ("GEMM", "triton")}, rel=1e-6)
    percentages = dict(db.execute("select op_category, percentage from ops_summary_by_category where trace_id = ?",
                                  [region]).fetchall())
    total = sum(expected.values())
    assert percentages == pytest.approx({c: 100.0 * ms / total for c, ms in expected.items()}, rel=1e-6)
    # compare's table, the inference CSV's table and kernel_summary's parent category say it too
    compare = _category_ms(db, "trace_category_kernel_time", region, "kernel_time_ms", "category")
    assert compare == pytest.approx(expected, rel=1e-6)
    by_module = _category_ms(db, "ops_summary_by_category_and_module", region)
    assert by_module == pytest.approx(expected, rel=1e-6)
    kernel_parent = _category_ms(db, "kernel_summary", region, "kernel_duration_sum_us / 1000.0", "parent_op_category")
    assert kernel_parent == pytest.approx(expected, rel=1e-6)
    unified = _category_ms(db, "intermediate.int_unified_ops", region, "kernel_time_us / 1000.0")
    assert unified == pytest.approx(expected, rel=1e-6)


def test_the_csvs_list_the_regions_categories(compiled_db) -> None:
    db, _, _, region = compiled_db
    sheet = perf_report.ops_summary_by_category(db, region).to_pylist()
    assert [row["op category"] for row in sheet] == ["GEMM", "SDPA_fwd", "triton"]
    assert sheet[0]["Percentage (%)"] == pytest.approx(64.0, abs=0.1)
    ops = perf_report.ops_summary(db, region).to_pylist()
    assert [(row["name"], row["Categories"]) for row in ops] == [
        ("Torch-Compiled Region: 0/0", "['GEMM', 'SDPA_fwd', 'triton']")]
    module_rows = db.execute("select op_categories from ops_summary_by_module where trace_id = ?", [region]).fetchall()
    assert module_rows == [(["GEMM", "SDPA_fwd", "triton"],)]
