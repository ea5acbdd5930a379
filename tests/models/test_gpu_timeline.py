"""gpu_timeline must equal TraceLens' gpu_timeline.csv for every reference trace."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import EXPECTED, EXPECTED_TRACES, trace_id_of

TIMELINE_ROWS = [
    "computation_time",
    "exposed_comm_time",
    "exposed_memcpy_time",
    "busy_time",
    "idle_time",
    "total_time",
    "total_comm_time",
    "total_memcpy_time",
]
RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE_MS = 1e-6  # 1 ns


def _reference(folder: str) -> dict[str, tuple[float, float]]:
    with (EXPECTED / folder / "gpu_timeline.csv").open() as handle:
        return {row["type"]: (float(row["time ms"]), float(row["percent"])) for row in csv.DictReader(handle)}


@pytest.mark.parametrize("folder", sorted(EXPECTED_TRACES))
def test_gpu_timeline_matches_tracelens(db, folder: str) -> None:
    trace_id = trace_id_of(db, EXPECTED_TRACES[folder])
    reference = _reference(folder)
    assert sorted(reference) == sorted(TIMELINE_ROWS)
    columns = [f"{name}_ms" for name in TIMELINE_ROWS] + [f"{name}_percent" for name in TIMELINE_ROWS]
    row = db.execute(f"select {', '.join(columns)} from gpu_timeline where trace_id = ?", [trace_id]).fetchone()
    assert row is not None
    ours = dict(zip(columns, row))
    for name in TIMELINE_ROWS:
        expected_ms, expected_percent = reference[name]
        assert ours[f"{name}_ms"] == pytest.approx(expected_ms, rel=RELATIVE_TOLERANCE, abs=ABSOLUTE_TOLERANCE_MS), name
        assert ours[f"{name}_percent"] == pytest.approx(expected_percent, rel=RELATIVE_TOLERANCE, abs=1e-6), name


def test_unlinked_events_widen_the_all_events_timeline(db) -> None:
    """Qwen H100: 509 GPU events ran before the host window; TraceLens reports 34.892 ms linked
    and 49.653 ms with unlinked kernels included."""
    trace_id = trace_id_of(db, "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    linked, everything = db.execute(
        "select l.total_time_ms, a.total_time_ms from gpu_timeline l "
        "join gpu_timeline_all_events a using (trace_id) where trace_id = ?",
        [trace_id],
    ).fetchone()
    assert linked == pytest.approx(34.892, abs=1e-3)
    assert everything == pytest.approx(49.653, abs=1e-3)


def test_timeline_invariant_holds_everywhere(db) -> None:
    violations = db.execute(
        "select trace_id from gpu_timeline where abs(computation_time_ms + exposed_comm_time_ms "
        "+ exposed_memcpy_time_ms + idle_time_ms - total_time_ms) > 1e-6"
    ).fetchall()
    assert violations == []
