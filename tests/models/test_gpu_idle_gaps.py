"""gpu_idle_gaps on the real traces: the gaps are exactly the idle time of gpu_timeline (and so of
TraceLens' reference gpu_timeline.csv), and the host columns equal a brute-force search of the
launching thread's host events."""

from __future__ import annotations

import csv

import duckdb
import pytest

from tests.conftest import EXPECTED, EXPECTED_TRACES, GAP_CLASS_VARS, GapMechanisms, trace_id_of

BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"
B200_EAGER = "b200/eager_trace.json.gz"


def _reference_idle_ms(folder: str) -> float:
    with (EXPECTED / folder / "gpu_timeline.csv").open() as handle:
        return next(float(row["time ms"]) for row in csv.DictReader(handle) if row["type"] == "idle_time")


@pytest.mark.parametrize("folder", sorted(EXPECTED_TRACES))
def test_gaps_add_up_to_the_reference_idle_time(db: duckdb.DuckDBPyConnection, folder: str) -> None:
    trace_id = trace_id_of(db, EXPECTED_TRACES[folder])
    gap_ms, count, first, last, distinct = db.execute(
        "select coalesce(sum(duration_us), 0) / 1000, count(*), min(gap_id), max(gap_id), count(distinct gap_id) "
        "from gpu_idle_gaps where trace_id = ?", [trace_id]).fetchone()
    idle_ms = db.execute("select idle_time_ms from gpu_timeline where trace_id = ?", [trace_id]).fetchone()[0]
    assert gap_ms == pytest.approx(idle_ms, abs=1e-6)
    assert gap_ms == pytest.approx(_reference_idle_ms(folder), rel=1e-6, abs=1e-6)
    if count:
        assert (first, last, distinct) == (1, count, count)


def test_gaps_are_ordered_disjoint_and_between_linked_kernels(db: duckdb.DuckDBPyConnection) -> None:
    bad = db.execute("""
        with ordered as (
            select *, lead(start_us) over (partition by trace_id order by gap_id) as next_start_us
            from gpu_idle_gaps
        )
        select count(*) filter (where ordered.duration_us <= 0 or ordered.next_start_us < ordered.end_us
                                or abs(ordered.duration_us - (ordered.end_us - ordered.start_us)) > 1e-9),
               count(*) filter (where before.end_us <> ordered.start_us or after.ts_us <> ordered.end_us
                                or not before.is_linked or not after.is_linked),
               count(*)
        from ordered
        join kernels as before on before.trace_id = ordered.trace_id and before.event_idx = ordered.kernel_before_event_idx
        join kernels as after on after.trace_id = ordered.trace_id and after.event_idx = ordered.kernel_after_event_idx
    """).fetchone()
    assert bad[0] == 0 and bad[1] == 0
    assert bad[2] > 5000  # every test trace contributes


def test_no_linked_kernel_runs_inside_a_gap(db: duckdb.DuckDBPyConnection) -> None:
    inside = db.execute("""
        select count(*) from gpu_idle_gaps as gaps
        join kernels on kernels.trace_id = gaps.trace_id and kernels.is_linked
         and kernels.ts_us < gaps.end_us and kernels.end_us > gaps.start_us
    """).fetchone()[0]
    assert inside == 0


def test_next_launch_is_the_launch_of_the_kernel_closing_the_gap(db: duckdb.DuckDBPyConnection) -> None:
    wrong = db.execute("""
        select count(*) from gpu_idle_gaps as gaps
        join kernels on kernels.trace_id = gaps.trace_id and kernels.event_idx = gaps.kernel_after_event_idx
        join events on events.trace_id = gaps.trace_id and events.event_idx = gaps.next_launch_event_idx
        where kernels.launch_event_idx <> gaps.next_launch_event_idx
           or events.ts_us <> gaps.next_launch_ts_us
           or abs(gaps.launch_lead_us - (gaps.end_us - events.ts_us)) > 1e-9
           or abs(gaps.launch_delay_us - (events.ts_us - gaps.start_us)) > 1e-9
           or events.tid <> gaps.host_tid
    """).fetchone()[0]
    assert wrong == 0
    # a launch precedes the kernel it launches
    assert db.execute("select min(launch_lead_us) from gpu_idle_gaps").fetchone()[0] > 0


# Reference: every host event of the launching thread spanning the instant, the innermost being the
# latest to start (then the deepest): a plain range join, no ASOF and no walk up the call tree.
BRUTE_FORCE_SQL = """
with instants as (
    select gap_id, 'start' as instant, start_us as at_us, host_pid, host_tid
    from gpu_idle_gaps where trace_id = $trace_id
    union all
    select gap_id, 'end' as instant, end_us as at_us, host_pid, host_tid
    from gpu_idle_gaps where trace_id = $trace_id
),
spanning as (
    select instants.gap_id, instants.instant,
        case when host.category in ('cuda_runtime', 'cuda_driver') then 'runtime' else host.category end as kind,
        host.event_idx, host.name, host.ts_us, host.depth
    from instants
    join staging.stg_trace__host_ops as host
      on host.trace_id = $trace_id and host.in_tree and host.pid = instants.host_pid and host.tid = instants.host_tid
     and host.ts_us <= instants.at_us and host.end_us >= instants.at_us
)
select gap_id, instant, kind, arg_max(event_idx, (ts_us, depth)) as event_idx
from spanning
group by all
"""

def _mart_host_columns(db: duckdb.DuckDBPyConnection, trace_id: str) -> set[tuple]:
    parts = [
        f"select gap_id, '{instant}' as instant, '{kind}' as kind, {instant}_{kind}_event_idx as event_idx "
        f"from gpu_idle_gaps where trace_id = $trace_id and {instant}_{kind}_event_idx is not null"
        for instant in ("start", "end") for kind in ("cpu_op", "python_function", "runtime")
    ]
    return set(db.execute(" union all ".join(parts), {"trace_id": trace_id}).fetchall())


@pytest.mark.parametrize("trace", [BERT_H100, RESNET, B200_EAGER])
def test_host_stack_columns_equal_a_brute_force_search(db: duckdb.DuckDBPyConnection, trace: str) -> None:
    trace_id = trace_id_of(db, trace)
    expected = set(db.execute(BRUTE_FORCE_SQL, {"trace_id": trace_id}).fetchall())
    assert len(expected) > 100
    assert _mart_host_columns(db, trace_id) == expected


def test_names_and_return_times_belong_to_the_recorded_events(db: duckdb.DuckDBPyConnection) -> None:
    checks = " or ".join(
        f"(g.{side}_{kind}_event_idx is not null and not exists (select 1 from events e where e.trace_id = g.trace_id "
        f"and e.event_idx = g.{side}_{kind}_event_idx and e.name = g.{side}_{kind}_name"
        + (f" and e.end_us = g.start_{kind}_end_us" if side == "start" else "") + "))"
        for side in ("start", "end") for kind in ("cpu_op", "python_function", "runtime"))
    assert db.execute(f"select count(*) from gpu_idle_gaps g where {checks}").fetchone()[0] == 0


def test_bert_sync_gap_shows_the_host_blocked_in_a_stream_synchronize(db: duckdb.DuckDBPyConnection) -> None:
    """The BERT H100 trace reads one GPU scalar (`aten::item`): the gap it opens is the one in which
    the host sits in cudaStreamSynchronize and returns before the GPU is fed again."""
    trace_id = trace_id_of(db, BERT_H100)
    rows = db.execute(
        "select start_cpu_op_name, start_runtime_end_us <= end_us, duration_us from gpu_idle_gaps "
        "where trace_id = ? and start_runtime_name = 'cudaStreamSynchronize'", [trace_id]).fetchall()
    assert rows == [("aten::_local_scalar_dense", True, pytest.approx(153.855, abs=1e-3))]


def test_graph_replay_gaps_are_between_graph_launched_kernels(db: duckdb.DuckDBPyConnection) -> None:
    counts = dict(db.execute("""
        select t.source_path like '%vllm_decode_full%', count(*) filter (where g.is_inside_graph_replay)
        from gpu_idle_gaps g join traces t using (trace_id) group by 1
    """).fetchall())
    assert counts[True] == 379  # of the vLLM decode trace's 391 gaps, between kernels of its graph replays
    wrong = db.execute("""
        select count(*) from gpu_idle_gaps g
        join kernels b on b.trace_id = g.trace_id and b.event_idx = g.kernel_before_event_idx
        join kernels a on a.trace_id = g.trace_id and a.event_idx = g.kernel_after_event_idx
        where g.is_inside_graph_replay <> (b.is_graph_launch and a.is_graph_launch)
    """).fetchone()[0]
    assert wrong == 0


# ---- gap classes ----------------------------------------------------------------------------------

BERT_MI300 = "mi300/gaunernst_bert-small-uncased__1016001.json.gz"
SYNC_TOLERANCE_US = GAP_CLASS_VARS["idle_gap_sync_span_tolerance_us"]
LONG_GAP_US = GAP_CLASS_VARS["idle_gap_long_us"]


def test_a_call_that_returns_inside_the_gap_is_never_its_cause(db: duckdb.DuckDBPyConnection) -> None:
    """Over every test trace: sync_blocked only where a synchronizing call spans the whole gap; the
    calls that return inside a gap (BERT's stream sync / blocking copy, 1-4 us after the gap opens)
    do not make it sync_blocked."""
    rows = db.execute("""
        select gap_class, start_runtime_end_us >= end_us - $tolerance as spans, count(*)
        from gpu_idle_gaps where start_runtime_name in $names group by all
    """, {"tolerance": SYNC_TOLERANCE_US, "names": GAP_CLASS_VARS["synchronizing_runtime_calls"]}).fetchall()
    returned_inside = {cls: n for cls, spans, n in rows if not spans}
    assert sum(returned_inside.values()) >= 5  # BERT x 2, Qwen x 2, TimeSformer, SGLang open gaps this way
    assert "sync_blocked" not in returned_inside


def test_same_gaps_get_the_same_class_on_both_vendors(db: duckdb.DuckDBPyConnection) -> None:
    """BERT-small on H100 and MI300X: the same 60 gaps of the same forward pass, one class each, on
    both vendors; the gap that opens as the host returns from its sync (`cudaStreamSynchronize` on
    H100, `hipMemcpyWithStream` on MI300X) is the same gap, launched late after the sync on both."""
    classes = {trace: dict(db.execute(
        "select gap_id, (gap_class, gap_class_reason) from gpu_idle_gaps where trace_id = ?",
        [trace_id_of(db, trace)]).fetchall()) for trace in (BERT_H100, BERT_MI300)}
    assert len(classes[BERT_H100]) == len(classes[BERT_MI300]) == 60
    assert classes[BERT_H100] == classes[BERT_MI300]
    after_sync = [gap for gap, (_, reason) in classes[BERT_H100].items() if reason == "launched_after_sync_returned"]
    assert len(after_sync) == 1 and classes[BERT_H100][after_sync[0]][0] == "launch_bound"


def test_window_edge_gaps_are_long_first_or_last_gaps(db: duckdb.DuckDBPyConnection) -> None:
    wrong, edges = db.execute("""
        with last_gap as (select trace_id, max(gap_id) as last_id from gpu_idle_gaps group by trace_id)
        select count(*) filter (where (g.gap_class = 'window_edge')
                                      <> (g.gap_id in (1, l.last_id) and g.duration_us >= $long)),
               count(*) filter (where g.gap_class = 'window_edge')
        from gpu_idle_gaps g join last_gap l using (trace_id)
    """, {"long": LONG_GAP_US}).fetchone()
    assert wrong == 0 and edges >= 1  # SGLang decode's 463 ms first gap


def _class_of(gap_mechanisms: GapMechanisms, variant: str) -> dict:
    trace_id, gap_id = gap_mechanisms.gaps[variant]
    cursor = gap_mechanisms.db.execute("select * from gpu_idle_gaps where trace_id = ? and gap_id = ?", [trace_id, gap_id])
    return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


def test_a_sync_that_returns_as_the_gap_opens_is_not_blamed_on_either_vendor(gap_mechanisms: GapMechanisms) -> None:
    """The OWLv2 shape: a 10 ms gap opened by a synchronizing call that returns microseconds into
    it. Both vendors: host work after the sync returned, with the host's frames, never sync_blocked."""
    for vendor in ("h100", "mi300"):
        gap = _class_of(gap_mechanisms, f"returns_early_{vendor}")
        assert gap["duration_us"] > 10_000
        assert gap["start_runtime_end_us"] - gap["start_us"] < 10  # the call ended right after the gap opened
        assert (gap["gap_class"], gap["gap_class_reason"]) == ("host_work", "launched_after_sync_returned"), vendor
        assert gap["start_python_function_name"] and gap["end_python_function_name"]


def test_a_blocking_copy_that_spans_its_gap_is_sync_blocked(gap_mechanisms: GapMechanisms) -> None:
    gap = _class_of(gap_mechanisms, "spans_mi300")
    assert gap["start_runtime_name"] == "hipMemcpyWithStream" and gap["start_runtime_end_us"] >= gap["end_us"]
    assert gap["launch_lead_us"] > 500
    assert (gap["gap_class"], gap["gap_class_reason"]) == ("sync_blocked", "sync_call_spans_gap")


def test_work_queued_ahead_that_waits_is_queued_waiting(gap_mechanisms: GapMechanisms) -> None:
    gap = _class_of(gap_mechanisms, "queued_h100")
    assert gap["duration_us"] > 5_000 and gap["launch_lead_us"] > 5_000  # launched on time, then held
    assert gap["launch_delay_us"] < 0.05 * gap["launch_lead_us"]
    assert (gap["gap_class"], gap["gap_class_reason"]) == ("queued_waiting", "queued_ahead")
