"""`tracelake analyze --mode inference-graph --capture-folder DIR` writes TraceLens' inference
perf-report layout, compared with TraceLens' inference-mode CSVs made with the same capture
folders (tests/data/expected/inference__*).

Where TraceLake names a serving op's category and TraceLens leaves it in `other` (the seed's
`tracelens_category`: vLLM's moe_forward, TopK, SortTokens, rotary embedding), the comparison moves
those ops back to TraceLens' label first; every other row is compared as written.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from tests.conftest import EXPECTED, EXPECTED_TRACES, TRACES
from tests.expert.conftest import CAPTURES
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.reports.perf_report import perf_report_tables
from tracelake.warehouse import Warehouse

FOLDERS = ("inference__sglang_decode", "inference__vllm_decode_full")
OP_TABLES = {"gpu_timeline", "ops_summary", "ops_summary_by_category", "ops_unique_args", "unified_perf_summary"}
# TraceLens models vLLM's Triton MoE as two pseudo-ops (MoE_unfused up/down); TraceLake models
# vllm::moe_forward as one fused MoE op (docs/divergences.md "Serving-op categories")
SHEET_EQUIVALENTS = {"MoE_unfused_fwd": "MoE_fused_fwd"}
REL = 1e-3
# what tells two rows of one roofline sheet apart (TraceLens groups by the op's whole signature)
SHEET_ROW_KEY = ("name", "Input Dims_first", "Input type_first", "Input Strides_first", "Concrete Inputs_first", "name_count")


def _read(folder: Path, name: str) -> list[dict[str, str]]:
    with (folder / f"{name}.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def _header(folder: Path, name: str) -> list[str]:
    with (folder / f"{name}.csv").open(newline="") as handle:
        return next(csv.reader(handle))


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str, str, Warehouse]]:
    """Both graph-replay serving traces analyzed once with their capture folders, in inference mode."""
    warehouse = Warehouse(tmp_path_factory.mktemp("inference_csvs") / "wh")
    out_root = tmp_path_factory.mktemp("inference_csv_reports")
    done = {}
    for folder in FOLDERS:
        options = AnalyzeOptions(jobs=2, mode="inference-graph", capture_folder=CAPTURES / folder,
                                 out_dir=out_root / folder)
        outcome = run_analysis(TRACES / EXPECTED_TRACES[folder], warehouse, options)
        done[folder] = (outcome.out_dir / "perf_report_csvs", outcome.trace_id, outcome.platform, warehouse)
    return done


@pytest.fixture(scope="module")
def relabelled(analyzed) -> dict[str, tuple[str, str, str]]:
    """op -> (TraceLake's category, TraceLens' category, TraceLake's sheet) for the relabelled ops."""
    warehouse = next(iter(analyzed.values()))[3]
    with warehouse.connect_read_only() as con:
        rows = con.execute("select op_name, category, tracelens_category, perf_family from op_categories "
                           "where coalesce(tracelens_category, '') <> ''").fetchall()
    return {name: (ours, theirs, f"{family}_fwd" if family else "") for name, ours, theirs, family in rows}


def _ours(analyzed, folder: str) -> Path:
    return analyzed[folder][0]


@pytest.mark.parametrize("folder", FOLDERS)
def test_inference_report_writes_tracelens_file_names(analyzed, relabelled, folder: str) -> None:
    written = {path.stem for path in _ours(analyzed, folder).glob("*.csv")}
    reference = {SHEET_EQUIVALENTS.get(path.stem, path.stem) for path in (EXPECTED / folder).glob("*.csv")}
    assert OP_TABLES | reference <= written, reference - written
    # nothing TraceLens' inference report does not write, but kernel_summary (ours, as in default
    # mode) and the sheets of the ops TraceLens leaves in `other`
    extra = written - reference - {"kernel_summary"}
    assert extra <= {sheet for _, _, sheet in relabelled.values()}, extra


@pytest.mark.parametrize("folder", FOLDERS)
@pytest.mark.parametrize("table", ["ops_summary", "ops_summary_by_category"])
def test_module_summaries_have_tracelens_inference_columns(analyzed, folder: str, table: str) -> None:
    assert _header(_ours(analyzed, folder), table) == _header(EXPECTED / folder, table)


@pytest.mark.parametrize("folder", FOLDERS)
def test_gpu_timeline_matches(analyzed, folder: str) -> None:
    ours = {row["type"]: float(row["time ms"]) for row in _read(_ours(analyzed, folder), "gpu_timeline")}
    reference = {row["type"]: float(row["time ms"]) for row in _read(EXPECTED / folder, "gpu_timeline")}
    assert ours.keys() == reference.keys()
    for kind, time_ms in reference.items():
        assert ours[kind] == pytest.approx(time_ms, rel=REL, abs=1e-6), kind


@pytest.mark.parametrize("folder", FOLDERS)
def test_ops_summary_rows_per_name_and_parent_module_match(analyzed, relabelled, folder: str) -> None:
    ours = {(row["name"], row["parent_module"]): row for row in _read(_ours(analyzed, folder), "ops_summary")}
    reference = {(row["name"], row["parent_module"]): row for row in _read(EXPECTED / folder, "ops_summary")}
    assert sorted(ours) == sorted(reference)
    for key, expected in reference.items():
        row = ours[key]
        assert row["Count"] == expected["Count"], key
        assert row["total_subtree_kernel_time_count"] == expected["total_subtree_kernel_time_count"], key
        for column in ("total_direct_kernel_time_sum", "total_subtree_kernel_time_sum", "Percentage (%)"):
            assert float(row[column]) == pytest.approx(float(expected[column]), rel=REL), (key, column)
        assert row["call_stack_first"] == expected["call_stack_first"], key
        categories = ast.literal_eval(row["Categories"])
        if key[0] in relabelled:
            assert categories == [relabelled[key[0]][0]] and ast.literal_eval(expected["Categories"]) == [relabelled[key[0]][1]]
        else:
            assert categories == ast.literal_eval(expected["Categories"]), key


def _folded_rows(folder: Path, relabelled: dict[str, tuple[str, str, str]]) -> dict[tuple[str, str], tuple[int, float]]:
    """(op category, parent_module) -> (Count, kernel ms) of ops_summary_by_category, with the
    relabelled ops' rows of ops_summary moved back to TraceLens' category."""
    rows = {(row["op category"], row["parent_module"]): (int(row["Count"]), float(row["total_direct_kernel_time_ms"]))
            for row in _read(folder, "ops_summary_by_category")}
    for op in _read(folder, "ops_summary"):
        if op["name"] not in relabelled:
            continue
        ours, theirs, _ = relabelled[op["name"]]
        count, time_ms = int(op["Count"]), float(op["total_direct_kernel_time_ms"])
        for key, sign in (((ours, op["parent_module"]), -1), ((theirs, op["parent_module"]), 1)):
            held = rows.get(key, (0, 0.0))
            rows[key] = (held[0] + sign * count, held[1] + sign * time_ms)
    return {key: value for key, value in rows.items() if value[0] > 0}


@pytest.mark.parametrize("folder", FOLDERS)
def test_category_rows_per_parent_module_match(analyzed, relabelled, folder: str) -> None:
    ours = _folded_rows(_ours(analyzed, folder), relabelled)
    reference = _folded_rows(EXPECTED / folder, {})
    assert sorted(ours) == sorted(reference)
    for key, (count, time_ms) in reference.items():
        assert ours[key][0] == count, key
        assert ours[key][1] == pytest.approx(time_ms, rel=REL), key
    stacks = {(r["op category"], r["parent_module"]): r["call_stack_first"] for r in _read(_ours(analyzed, folder), "ops_summary_by_category")}
    for row in _read(EXPECTED / folder, "ops_summary_by_category"):
        key = (row["op category"], row["parent_module"])
        if key in stacks and row["op category"] != "other":  # `other` loses its first op to a relabel
            assert stacks[key] == row["call_stack_first"], key


@pytest.mark.parametrize("folder", FOLDERS)
def test_category_totals_over_parent_modules_match(analyzed, relabelled, folder: str) -> None:
    def totals(rows: dict[tuple[str, str], tuple[int, float]]) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for (category, _), (count, time_ms) in rows.items():
            held = out.get(category, (0, 0.0))
            out[category] = (held[0] + count, held[1] + time_ms)
        return out

    ours = totals(_folded_rows(_ours(analyzed, folder), relabelled))
    reference = totals(_folded_rows(EXPECTED / folder, {}))
    assert ours.keys() == reference.keys()
    for category, (count, time_ms) in reference.items():
        assert ours[category][0] == count, category
        assert ours[category][1] == pytest.approx(time_ms, rel=REL), category


def _gemm_mnk(name: str, dims_text: str) -> tuple[int, int, int]:
    """(M, N, K) from a GEMM op's Input Dims: aten::mm (A, B), aten::addmm (bias, A, B), and the
    serving wrappers aiter::gemm_a16w16 / vllm::rocm_unquantized_gemm (A, W) with W as (N, K)."""
    dims = ast.literal_eval(dims_text)
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
    elif name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
    else:
        (m, k), (n, _) = dims[0], dims[1]
    return m, n, k


def _gemm_rows(rows: list[dict[str, str]]) -> list[tuple[tuple[int, int, int], int, float]]:
    return sorted((_gemm_mnk(row["name"], row["Input Dims"]), int(row["operation_count"]), float(row["Kernel Time (µs)_sum"]))
                  for row in rows if row["op category"] == "GEMM")


@pytest.mark.parametrize("folder", FOLDERS)
def test_unified_gemm_rows_match_in_shape_count_and_kernel_time(analyzed, folder: str) -> None:
    ours = _gemm_rows(_read(_ours(analyzed, folder), "unified_perf_summary"))
    reference = _gemm_rows(_read(EXPECTED / folder, "unified_perf_summary"))
    assert [(mnk, count) for mnk, count, _ in ours] == [(mnk, count) for mnk, count, _ in reference]
    for (mnk, _, time_us), (_, _, expected_us) in zip(ours, reference):
        assert time_us == pytest.approx(expected_us, rel=REL), mnk


@pytest.mark.parametrize("folder", FOLDERS)
def test_unified_attention_rows_match(analyzed, folder: str) -> None:
    ours = {(row["name"], row["Input Dims"]): row for row in _read(_ours(analyzed, folder), "unified_perf_summary")}
    reference = [row for row in _read(EXPECTED / folder, "unified_perf_summary") if row["op category"] == "InferenceAttention"]
    assert reference
    for expected in reference:
        row = ours[(expected["name"], expected["Input Dims"])]
        assert row["operation_count"] == expected["operation_count"], expected["name"]
        assert float(row["Kernel Time (µs)_sum"]) == pytest.approx(float(expected["Kernel Time (µs)_sum"]), rel=REL)


@pytest.mark.parametrize("folder", FOLDERS)
def test_default_layout_without_inference_mode(analyzed, folder: str) -> None:
    """The same trace's report in default layout (what auto-detected inference writes) has no
    parent_module grouping and TraceLens' default sheet names."""
    _, trace_id, platform, warehouse = analyzed[folder]
    con = warehouse.connect_read_only()
    try:
        default = perf_report_tables(con, trace_id, platform)
        inference = perf_report_tables(con, trace_id, platform, inference=True)
    finally:
        con.close()
    assert default["ops_summary"].column_names == [
        "name", "total_direct_kernel_time_sum", "total_subtree_kernel_time_sum", "total_direct_kernel_time_ms",
        "total_subtree_kernel_time_ms", "Count", "Categories", "Percentage (%)", "Cumulative Percentage (%)"]
    assert "parent_module" not in default["ops_summary_by_category"].column_names
    # grouping by parent module splits categories, it never changes their totals
    def by_category(table) -> dict[str, float]:
        totals: dict[str, float] = {}
        for row in table.to_pylist():
            totals[row["op category"]] = totals.get(row["op category"], 0.0) + row["total_direct_kernel_time_ms"]
        return totals
    assert by_category(inference["ops_summary_by_category"]) == pytest.approx(by_category(default["ops_summary_by_category"]), rel=1e-9)


@pytest.mark.parametrize("folder", FOLDERS)
def test_unified_gemm_rows_carry_tracelens_names_and_shapes(analyzed, folder: str) -> None:
    """Every GEMM row of TraceLens' unified_perf_summary (name, Input Dims, count, kernel time)."""
    ours = {(row["name"], row["Input Dims"]): row for row in _read(_ours(analyzed, folder), "unified_perf_summary")}
    for expected in _read(EXPECTED / folder, "unified_perf_summary"):
        if expected["op category"] == "GEMM":
            row = ours[(expected["name"], expected["Input Dims"])]
            assert row["op category"] == "GEMM"
            assert row["operation_count"] == expected["operation_count"]
            assert float(row["Kernel Time (µs)_sum"]) == pytest.approx(float(expected["Kernel Time (µs)_sum"]), rel=REL)
            assert float(row["GFLOPS"]) == pytest.approx(float(expected["GFLOPS"]), rel=REL)
            assert float(row["Data Moved (MB)"]) == pytest.approx(float(expected["Data Moved (MB)"]), rel=REL)


@pytest.mark.parametrize("folder", FOLDERS)
def test_serving_sheets_rows_match(analyzed, folder: str) -> None:
    """Each row of TraceLens' RMSNorm_fwd, InferenceAttention_fwd and RoPE_fwd sheets has ours:
    the same op signature, GFLOPS, data moved and kernel time. Rows can share a signature (vLLM's
    sliding-window and full attention layers), so the rows are compared as sorted lists."""
    numbers = ("GFLOPS_first", "Data Moved (MB)_first", "Kernel Time (µs)_sum")
    for sheet in ("RMSNorm_fwd", "InferenceAttention_fwd", "RoPE_fwd"):
        if not (EXPECTED / folder / f"{sheet}.csv").exists():
            continue
        expected = _read(EXPECTED / folder, sheet)
        names = {row["name"] for row in expected}
        def rows(table: list[dict[str, str]], names: set[str] = names) -> list[tuple]:
            return sorted((tuple(row[c] for c in SHEET_ROW_KEY), *(float(row[c] or 0) for c in numbers))
                          for row in table if row["name"] in names)
        ours, reference = rows(_read(_ours(analyzed, folder), sheet)), rows(expected)
        assert [row[0] for row in ours] == [row[0] for row in reference], sheet
        for got, want in zip(ours, reference):
            assert got[1:] == pytest.approx(want[1:], rel=REL), (sheet, want[0][0])
