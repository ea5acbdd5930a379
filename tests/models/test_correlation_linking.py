"""GPU events link to their launches by flow where the trace has flows and by correlation where it
has none: variants of BERT H100 rewritten at test time, and two real flow-less HTA ranks."""

from __future__ import annotations

import duckdb
import pytest

RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE = 1e-6  # ms or percent
# Variants that keep every link: (file, how its GPU events link)
LINKED_VARIANTS = {
    "no_flows.json.gz": "correlation",
    "async_cpu_to_gpu_flows.json.gz": "flow",
    "legacy_categories.json.gz": "flow",
}
BERT_GPU_EVENTS = 61
# HTA 0.5.0 temporal breakdown, include_last_profiler_step=True (tests/data/README.md):
# file -> (span ms, busy ms, idle %), the README's figures
HTA_BREAKDOWN = {
    "sampled_rank-0.json.gz": (1222.847, 547.656, 55.21),
    "sampled_rank-1.json.gz": (1231.186, 580.050, 52.89),
}
HTA_GPU_EVENTS = {"sampled_rank-0.json.gz": 1204, "sampled_rank-1.json.gz": 1154}
HTA_RELATIVE_TOLERANCE = 1e-4
HTA_IDLE_PERCENT_TOLERANCE = 0.005  # the README rounds idle % to 2 decimals


def _trace_id(db: duckdb.DuckDBPyConnection, file_name: str) -> str:
    rows = db.execute("select trace_id from traces where file_name = ?", [file_name]).fetchall()
    assert len(rows) == 1, f"{file_name}: {len(rows)} traces"
    return rows[0][0]


def _timeline(db: duckdb.DuckDBPyConnection, file_name: str) -> dict[str, float]:
    result = db.execute("select * exclude (trace_id) from gpu_timeline where trace_id = ?", [_trace_id(db, file_name)])
    columns = [d[0] for d in result.description]
    rows = result.fetchall()
    assert len(rows) == 1, f"{file_name}: {len(rows)} gpu_timeline rows"
    return dict(zip(columns, rows[0]))


def _links(db: duckdb.DuckDBPyConnection, file_name: str) -> dict[tuple, tuple]:
    """GPU event (name, start, stream) -> its launch (name, start, thread) and launching cpu op
    (name, start); by content, since removing flow events shifts every event_idx after them."""
    rows = db.execute(
        """
        select kernels.name, kernels.ts_us, kernels.stream,
               kernels.launch_name, launch.ts_us, launch.tid, kernels.cpu_op_name, cpu_op.ts_us
        from kernels
        left join events as launch
            on kernels.trace_id = launch.trace_id and kernels.launch_event_idx = launch.event_idx
        left join events as cpu_op
            on kernels.trace_id = cpu_op.trace_id and kernels.cpu_op_id = cpu_op.event_idx
        where kernels.trace_id = ?
        """,
        [_trace_id(db, file_name)],
    ).fetchall()
    links = {row[:3]: row[3:] for row in rows}
    assert len(links) == len(rows), f"{file_name}: GPU events not told apart by name, start and stream"
    return links


def _check(db: duckdb.DuckDBPyConnection, file_name: str, check_name: str) -> tuple[float | None, str]:
    row = db.execute(
        "select value, verdict from trace_quality where trace_id = ? and check_name = ?",
        [_trace_id(db, file_name), check_name],
    ).fetchone()
    assert row is not None, f"{file_name}: no {check_name} check"
    return row


def _link_methods(db: duckdb.DuckDBPyConnection, file_name: str) -> dict[str, int]:
    return dict(db.execute(
        "select link_method, count(*) from kernels where trace_id = ? group by 1", [_trace_id(db, file_name)]
    ).fetchall())


@pytest.mark.parametrize("variant", sorted(LINKED_VARIANTS))
def test_variant_has_the_original_timeline(linking_db, variant: str) -> None:
    original, ours = _timeline(linking_db, "original.json.gz"), _timeline(linking_db, variant)
    assert sorted(ours) == sorted(original) and len(ours) == 16
    for column, expected in original.items():
        assert ours[column] == pytest.approx(expected, rel=RELATIVE_TOLERANCE, abs=ABSOLUTE_TOLERANCE), column


@pytest.mark.parametrize("variant", sorted(LINKED_VARIANTS))
def test_variant_links_every_gpu_event_to_the_original_launch(linking_db, variant: str) -> None:
    original = _links(linking_db, "original.json.gz")
    assert len(original) == BERT_GPU_EVENTS
    assert all(launch[0] is not None for launch in original.values())
    assert _links(linking_db, variant) == original


@pytest.mark.parametrize("variant", sorted(LINKED_VARIANTS))
def test_link_method_says_how_the_variant_linked(linking_db, variant: str) -> None:
    assert _link_methods(linking_db, "original.json.gz") == {"flow": BERT_GPU_EVENTS}
    assert _link_methods(linking_db, variant) == {LINKED_VARIANTS[variant]: BERT_GPU_EVENTS}


def test_trace_quality_counts_correlation_links(linking_db) -> None:
    assert _check(linking_db, "no_flows.json.gz", "correlation_linked_gpu_events") == (BERT_GPU_EVENTS, "info")
    assert _check(linking_db, "no_flows.json.gz", "linked_gpu_time_share") == (1.0, "pass")
    assert _check(linking_db, "no_flows.json.gz", "unlinked_gpu_events") == (0.0, "pass")
    for flowed in ("original.json.gz", "async_cpu_to_gpu_flows.json.gz"):
        assert _check(linking_db, flowed, "correlation_linked_gpu_events") == (0.0, "pass")


def test_a_trace_nothing_links_fails_the_quality_check(linking_db) -> None:
    assert _link_methods(linking_db, "unlinkable.json.gz") == {"none": BERT_GPU_EVENTS}
    assert _check(linking_db, "unlinkable.json.gz", "linked_gpu_time_share") == (0.0, "fail")
    assert _check(linking_db, "unlinkable.json.gz", "unlinked_gpu_events") == (BERT_GPU_EVENTS, "info")
    assert linking_db.execute(
        "select count(*) from gpu_timeline where trace_id = ?", [_trace_id(linking_db, "unlinkable.json.gz")]
    ).fetchone() == (0,)


def test_legacy_categories_read_as_current_names(linking_db) -> None:
    categories = lambda name: linking_db.execute(  # noqa: E731
        "select category, count(*) from events where trace_id = ? group by 1 order by 1", [_trace_id(linking_db, name)]
    ).fetchall()
    assert categories("legacy_categories.json.gz") == categories("original.json.gz")


@pytest.mark.parametrize("file_name", sorted(HTA_BREAKDOWN))
def test_flowless_hta_rank_matches_hta_temporal_breakdown(linking_db, file_name: str) -> None:
    span_ms, busy_ms, idle_percent = HTA_BREAKDOWN[file_name]
    assert _link_methods(linking_db, file_name) == {"correlation": HTA_GPU_EVENTS[file_name]}
    ours = _timeline(linking_db, file_name)
    assert ours["total_time_ms"] == pytest.approx(span_ms, rel=HTA_RELATIVE_TOLERANCE)
    assert ours["busy_time_ms"] == pytest.approx(busy_ms, rel=HTA_RELATIVE_TOLERANCE)
    assert ours["idle_time_ms"] == pytest.approx(span_ms - busy_ms, rel=HTA_RELATIVE_TOLERANCE)
    assert ours["idle_time_percent"] == pytest.approx(idle_percent, abs=HTA_IDLE_PERCENT_TOLERANCE)
    # the splits follow TraceLens, not HTA (which counts communication under compute as compute)
    assert ours["computation_time_ms"] + ours["exposed_comm_time_ms"] + ours["exposed_memcpy_time_ms"] == \
        pytest.approx(busy_ms, rel=HTA_RELATIVE_TOLERANCE)
