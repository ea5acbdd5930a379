"""The what-if replay (analyzers/replay.py) and the critical path mart, on every real trace of
tests/data/traces: an unchanged replay reproduces the measured timeline; a launch-bound step gains
nothing from faster kernels until its launches go; a GPU-bound one gains what its kernels lose; the
critical path of each step is one chain of binding edges ending at the step's last GPU event."""

from __future__ import annotations

import duckdb
import pytest

from tests.conftest import trace_id_of
from tests.expert.conftest import ALL_TRACES, BERT_H100, BERT_MI300, RESNET, TIMESFORMER
from tracelake.analyzers import replay

# Kineto's timestamps are µs with a ns fraction; the replay adds and subtracts measured lags, so an
# unchanged replay may differ from the measured span by float rounding only.
SPAN_TOLERANCE_US = 0.1


def _graph(db: duckdb.DuckDBPyConnection, relative: str) -> replay.TimelineGraph:
    return replay.load_graph(db, trace_id_of(db, relative))


def _compute_cut(db: duckdb.DuckDBPyConnection, relative: str, share: float) -> replay.Change:
    rows = db.execute("select event_idx, dur_us * ? from kernels where trace_id = ? and gpu_bucket = 'computation'",
                      [share, trace_id_of(db, relative)]).fetchall()
    return replay.Change(dict(rows), {})


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_an_unchanged_replay_reproduces_the_measured_timeline(db: duckdb.DuckDBPyConnection, relative: str) -> None:
    graph = _graph(db, relative)
    unchanged = replay.replay(graph)
    assert unchanged.converged
    span_error, worst_start = replay.reproduction_error(graph)
    assert abs(span_error) < SPAN_TOLERANCE_US, f"span off by {span_error:.4f} us"
    # every GPU event starts where it was measured, but for events the trace records out of order
    # on their own stream (a start before the previous event's end), at most a few µs
    assert worst_start < 5.0, f"a GPU event starts {worst_start:.3f} us away from its measured start"


@pytest.mark.parametrize("relative", [BERT_H100, BERT_MI300])
def test_faster_kernels_buy_nothing_on_a_launch_bound_step_until_its_launches_go(
        db: duckdb.DuckDBPyConnection, relative: str) -> None:
    graph = _graph(db, relative)
    base = replay.replay(graph).span_us
    halved = _compute_cut(db, relative, 0.5)
    cut_us = sum(halved.kernel_cuts.values())
    alone = base - replay.replay(graph, halved).span_us
    assert alone < 0.2 * cut_us, f"halving every kernel saved {alone:.1f} of {cut_us:.1f} us on a launch-bound step"
    # with every launch off the host (a GPU graph), the kernels run back to back: the cut is had
    graph_replayed = replay.Change({}, {}, dict.fromkeys(graph.gpu["event_idx"].to_list(), 1.0))
    after_graphs = replay.replay(graph, graph_replayed).span_us
    both = replay.replay(graph, graph_replayed.plus(halved)).span_us
    assert after_graphs - both > 0.9 * cut_us, f"after the launches go, halving saved {after_graphs - both:.1f} of {cut_us:.1f} us"


def test_a_gpu_bound_step_gains_what_its_kernels_lose(db: duckdb.DuckDBPyConnection) -> None:
    graph = _graph(db, TIMESFORMER)
    halved = _compute_cut(db, TIMESFORMER, 0.5)
    saved = replay.replay(graph).span_us - replay.replay(graph, halved).span_us
    assert saved > 0.95 * sum(halved.kernel_cuts.values())


def test_compute_behind_exposed_collectives_moves_them_through_the_stream_waits(db: duckdb.DuckDBPyConnection) -> None:
    """resnet's compute stream waits for its collectives' stream: faster compute moves the
    collectives and the compute after them earlier (the inferred cross-stream waits), so halving the
    compute saves a large part of what it cuts, not nothing."""
    graph = _graph(db, RESNET)
    assert graph.gpu["wait_event_idx"].is_not_null().sum() > 0
    halved = _compute_cut(db, RESNET, 0.5)
    saved = replay.replay(graph).span_us - replay.replay(graph, halved).span_us
    assert saved > 0.25 * sum(halved.kernel_cuts.values())


@pytest.mark.parametrize("relative", ALL_TRACES)
def test_each_steps_critical_path_is_one_chain_ending_at_its_last_gpu_event(
        db: duckdb.DuckDBPyConnection, relative: str) -> None:
    trace_id = trace_id_of(db, relative)
    has_gpu = db.execute("select count(*) from replay_gpu_nodes where trace_id = ?", [trace_id]).fetchone()
    paths = db.execute("select distinct step_number from critical_path where trace_id = ?", [trace_id]).fetchall()
    assert (len(paths) > 0) == bool(has_gpu and has_gpu[0])
    for (step,) in paths:
        nodes = db.execute("""
            select node_idx, predecessor_idx, end_us, node_kind from critical_path
            where trace_id = ? and step_number is not distinct from ?""", [trace_id, step]).fetchall()
        on_path = {n[0] for n in nodes}
        successors = [n[1] for n in nodes if n[1] in on_path]
        assert len(successors) == len(set(successors)) == len(nodes) - 1, "the path branches or breaks"
        terminal = db.execute("""
            select max(end_us) from replay_gpu_nodes
            where trace_id = ? and (step_number is not distinct from ? or ? is null)""", [trace_id, step, step]).fetchone()
        last = max(nodes, key=lambda n: n[2])
        assert last[3] == "gpu" and terminal is not None and last[2] == pytest.approx(terminal[0])
