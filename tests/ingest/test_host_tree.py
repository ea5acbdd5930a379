"""The host call tree rebuilt from timestamps, on real traces."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
from typing import Any

import duckdb
import pytest

from tests.conftest import TRACES, trace_id_of
from tests.ingest.probe_cases import make_probe_case
from tracelake.cli import main
from tracelake.ingest.limits import MAX_HOST_OP_NESTING
from tracelake.lakehouse import open_warehouse

BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
CPU_MLP = "cpu_only/cpu_mlp_training.json.gz"


def test_children_nest_inside_their_parents(db) -> None:
    bad = db.execute(
        "select count(*) from cpu_ops c join cpu_ops p on c.trace_id = p.trace_id and c.parent_id = p.op_id "
        "where c.ts_us < p.ts_us or c.end_us > p.end_us + 1.0 or c.depth <> p.depth + 1"
    ).fetchone()
    assert bad == (0,)


def test_roots_have_no_cpu_parent(db) -> None:
    rows = db.execute(
        "select count(*) filter (where is_cpu_root and parent_id is not null), "
        "count(*) filter (where not is_cpu_root and in_tree and parent_id is null) from cpu_ops"
    ).fetchone()
    assert rows == (0, 0)


def test_module_chain_comes_from_nn_module_frames(db) -> None:
    trace_id = trace_id_of(db, BERT_H100)
    chains = [row[0] for row in db.execute(
        "select module_chain from cpu_ops where trace_id = ? and name = 'aten::addmm'", [trace_id]
    ).fetchall()]
    assert chains and all(chain and chain[0] != "root" for chain in chains)
    assert any(any("Linear" in m for m in chain) for chain in chains)


def test_backward_ops_are_marked_in_training_traces(db) -> None:
    trace_id = trace_id_of(db, "mi300/resnet_act_checkpoint.json.gz")
    passes = dict(db.execute("select pass, count(*) from cpu_ops where trace_id = ? group by 1", [trace_id]).fetchall())
    assert passes.get("bwd", 0) > 0 and passes.get("fwd", 0) > 0


def test_backward_nodes_pair_with_their_forward_ops(db) -> None:
    """resnet (training): each ConvolutionBackward0 node links to one aten::convolution."""
    trace_id = trace_id_of(db, "mi300/resnet_act_checkpoint.json.gz")
    pairs = dict(db.execute(
        "select f.name, count(*) from cpu_ops b join cpu_ops f on b.trace_id = f.trace_id and b.forward_op_id = f.op_id "
        "where b.trace_id = ? and b.name = 'autograd::engine::evaluate_function: ConvolutionBackward0' group by 1",
        [trace_id],
    ).fetchall())
    assert pairs == {"aten::convolution": 60}
    unpaired = db.execute(
        "select count(*) from cpu_ops where trace_id = ? and name like 'autograd::engine::evaluate_function:%' "
        "and sequence_number is not null and forward_op_id is null", [trace_id]).fetchall()[0][0]
    assert unpaired == 0


# ---- nesting past the limits (issue 27: 20,000 nested ops took 8.3 GB) ----

PAST_LIMIT = MAX_HOST_OP_NESTING + 44
ADDED_OPS = "(starts_with(name, 'aten::nested_') or starts_with(name, 'aten::same_'))"


@pytest.fixture(scope="module")
def deep_warehouse(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CPU MLP trace with ops nested past the limit, same-time ops past it and nested
    nn.Module frames past it, each ingested through the CLI into one warehouse."""
    root = tmp_path_factory.mktemp("deep")
    raw = gzip.decompress((TRACES / CPU_MLP).read_bytes())
    folder = root / "traces"
    folder.mkdir()
    cases = {name: make_probe_case(name, raw, PAST_LIMIT, seed=27) for name in ("nested_ops", "same_time_ops",
                                                                                  "nested_modules")}
    for case in cases.values():
        (folder / f"{case.label}{case.suffix}").write_bytes(case.data)
    warehouse = root / "wh"
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()), \
            pytest.raises(SystemExit) as done:
        main(["ingest", str(folder), "--warehouse", str(warehouse), "--quiet", "--jobs", "1"])
    assert done.value.code == 0, stderr.getvalue()
    ids = {name: hashlib.sha256(case.data).hexdigest()[:16] for name, case in cases.items()}
    return {"warehouse": warehouse, "ids": ids}


def _deep_db(deep_warehouse: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    return open_warehouse(deep_warehouse["warehouse"]).connect_read_only()


def _one(db: duckdb.DuckDBPyConnection, sql: str, trace_id: str) -> tuple[Any, ...]:
    rows = db.execute(sql, [trace_id]).fetchall()
    assert len(rows) == 1, (sql, rows)
    return tuple(rows[0])


@pytest.mark.parametrize("case", ["nested_ops", "same_time_ops"])
def test_ops_nested_past_the_limit_leave_the_tree_and_are_counted(deep_warehouse: dict[str, Any], case: str) -> None:
    trace_id = deep_warehouse["ids"][case]
    with _deep_db(deep_warehouse) as db:
        value, verdict = _one(db, "select value, verdict from trace_quality where trace_id = ? "
                              "and check_name = 'host_tree_depth'", trace_id)
        kept, deepest, events = _one(db, "select count(*) filter (where in_tree), max(depth) filter (where in_tree), "
                                     f"count(*) from cpu_ops where trace_id = ? and {ADDED_OPS}", trace_id)
        longest = _one(db, "select max(distance) from cpu_op_ancestors where trace_id = ?", trace_id)
        in_events = _one(db, f"select count(*) from events where trace_id = ? and {ADDED_OPS}", trace_id)
    # the trace's own ops nest in none of the added ones (they start later), so exactly the
    # added ops past the limit leave the tree; every one of them stays in events
    assert (value, verdict) == (PAST_LIMIT - MAX_HOST_OP_NESTING, "warn")
    assert (kept, events, in_events) == (MAX_HOST_OP_NESTING, PAST_LIMIT, (PAST_LIMIT,))
    assert deepest == MAX_HOST_OP_NESTING - 1 and longest == (MAX_HOST_OP_NESTING - 1,)


def test_module_frames_nested_past_the_limit_are_no_calls(deep_warehouse: dict[str, Any]) -> None:
    trace_id = deep_warehouse["ids"]["nested_modules"]
    with _deep_db(deep_warehouse) as db:
        value, verdict = _one(db, "select value, verdict from trace_quality where trace_id = ? "
                              "and check_name = 'host_tree_depth'", trace_id)
        calls, deepest = _one(db, "select count(*), max(depth) from module_calls where trace_id = ? "
                              "and module_class = 'Block'", trace_id)
        chain = _one(db, "select max(len(module_chain)) from cpu_ops where trace_id = ?", trace_id)
    # the frames past the limit leave the tree; the op in each stays, under the deepest frame kept
    assert (value, verdict) == (PAST_LIMIT - MAX_HOST_OP_NESTING, "warn")
    assert calls == MAX_HOST_OP_NESTING and chain == (MAX_HOST_OP_NESTING,)
    assert deepest is not None and deepest < MAX_HOST_OP_NESTING


def test_real_traces_nest_within_the_limits(db) -> None:
    rows = db.execute("select t.file_name, q.value from trace_quality q join traces t using (trace_id) "
                      "where q.check_name = 'host_tree_depth'").fetchall()
    assert rows and all(value == 0 for _, value in rows)
