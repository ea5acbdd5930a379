"""gpu_idle_gaps on the real traces: the gaps are exactly the idle time of gpu_timeline (and so of
TraceLens' reference gpu_timeline.csv), and the host columns equal a brute-force search of the
launching thread's host events."""

from __future__ import annotations

import csv

import duckdb
import pytest

from tests.conftest import EXPECTED, EXPECTED_TRACES, trace_id_of

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
