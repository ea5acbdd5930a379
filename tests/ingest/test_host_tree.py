"""The host call tree rebuilt from timestamps, on real traces."""

from __future__ import annotations

from tests.conftest import trace_id_of

BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"


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
