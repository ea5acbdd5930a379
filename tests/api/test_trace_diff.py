"""`tracelake.diff(a, b)`: HTA's TraceDiff (ops and kernels added, removed, changed, with counts and
durations on each side) on the H100 and MI300X BERT traces, checked against SQL over the marts, and
the same rows `tracelake compare` judges."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import tracelake
from tests.conftest import TRACES
from tracelake.analyzers.regression import compare
from tracelake.core.errors import TraceLakeError

H100_BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
MI300_BERT = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
ATTENTION = "aten::_scaled_dot_product_flash_attention"


@pytest.fixture(scope="module")
def diff_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    folder = tmp_path_factory.mktemp("diff") / "wh"
    result = tracelake.open(folder, create=True).ingest([H100_BERT, MI300_BERT], jobs=1)
    h100, mi300 = result.trace_ids
    return folder, h100, mi300


def _one(wh: tracelake.WarehouseHandle, sql: str, params: list) -> float:
    return float(wh.sql(sql, params).fetchone()[0])


def test_the_diff_of_bert_on_h100_and_mi300x_matches_the_marts(diff_warehouse: tuple[Path, str, str]) -> None:
    folder, h100, mi300 = diff_warehouse
    d = tracelake.diff(h100, str(MI300_BERT), warehouse=folder)  # a trace id and an ingested file
    with tracelake.open(folder) as wh:
        # the same model: every op signature runs on both GPUs, with the same calls
        assert d.ops["status"].to_list() == ["changed"] * 16
        assert (d.ops["baseline_count"] == d.ops["candidate_count"]).all()
        # attention: 3.04x as long on MI300X, the largest change (op_perf, each trace's own platform)
        top = d.ops.row(0, named=True)
        assert top["name"] == ATTENTION
        op_sql = ("select sum(kernel_time_sum_us) / 1000.0 from op_perf where trace_id = $1 and name = $2 "
                  "and is_trace_platform")
        assert top["baseline_ms"] == pytest.approx(_one(wh, op_sql, [h100, ATTENTION]), rel=1e-9)
        assert top["candidate_ms"] == pytest.approx(_one(wh, op_sql, [mi300, ATTENTION]), rel=1e-9)
        assert top["candidate_ms"] / top["baseline_ms"] == pytest.approx(3.038, abs=0.001)
        # kernels: CUDA and ROCm libraries name their kernels apart; what each side runs adds up to
        # its GPU kernel time and count (linked GPU events)
        assert d.kernels["status"].value_counts().sort("status").rows() == [("added", 9), ("changed", 3), ("removed", 9)]
        kernel_sql = "select {} from kernels where trace_id = $1 and is_linked"
        for side, trace_id in (("baseline", h100), ("candidate", mi300)):
            assert d.kernels[f"{side}_ms"].sum() == pytest.approx(
                _one(wh, kernel_sql.format("sum(dur_us) / 1000.0"), [trace_id]), rel=1e-9)
            assert d.kernels[f"{side}_count"].sum() == _one(wh, kernel_sql.format("count(*)"), [trace_id])
        removed = d.kernels.filter(pl.col("status") == "removed")
        assert removed["candidate_count"].is_null().all() and (removed["delta_ms"] == -removed["baseline_ms"]).all()
    counts = {(r["what"], r["status"]): r["rows"] for r in d.counts().iter_rows(named=True)}
    assert counts == {("ops", "changed"): 16, ("kernels", "added"): 9, ("kernels", "changed"): 3,
                      ("kernels", "removed"): 9}


def test_compare_judges_the_rows_of_the_diff(diff_warehouse: tuple[Path, str, str]) -> None:
    folder, h100, mi300 = diff_warehouse
    with tracelake.open(folder) as wh:
        d = wh.diff(h100, mi300)
        verdict = compare(wh.connection().cursor(), [h100], [mi300])
    judged = {(op.name, op.input_dims, op.input_type, op.input_strides, op.concrete_inputs):
              (op.baseline_ms, op.candidate_ms, op.baseline_calls) for op in verdict.ops}
    listed = {(r["name"], r["input_dims"], r["input_type"], r["input_strides"], r["concrete_inputs"]):
              (r["baseline_ms"], r["candidate_ms"], r["baseline_count"]) for r in d.ops.iter_rows(named=True)}
    assert judged == listed
    assert verdict.signature_overlap_percent == pytest.approx(d.signature_overlap_percent()) == pytest.approx(100.0)


def test_a_trace_against_itself_is_unchanged_and_plots(diff_warehouse: tuple[Path, str, str], tmp_path: Path) -> None:
    folder, h100, _ = diff_warehouse
    d = tracelake.diff(h100, h100, warehouse=folder)
    assert set(d.ops["status"]) == set(d.kernels["status"]) == {"unchanged"}
    assert d.ops["delta_ms"].abs().max() == 0.0
    figure = tracelake.diff(h100, str(MI300_BERT), warehouse=folder).plot(top=5)
    assert len(figure.axes[0].patches) == 5  # one bar per change
    figure.savefig(tmp_path / "diff.png")
    assert (tmp_path / "diff.png").stat().st_size > 0


def test_bad_selectors_are_one_clear_error(diff_warehouse: tuple[Path, str, str]) -> None:
    folder, h100, _ = diff_warehouse
    with pytest.raises(TraceLakeError, match="matches no trace"):
        tracelake.diff(h100, "model=nobody", warehouse=folder)
    with pytest.raises(TraceLakeError, match="'ops' or 'kernels'"):
        tracelake.diff(h100, h100, warehouse=folder).plot("steps")
