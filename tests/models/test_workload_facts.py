"""`workload_facts`: the facts the findings' advice is conditioned on, on the real traces."""

from __future__ import annotations

import duckdb
import pytest

from tests.conftest import trace_id_of

QWEN_H100 = "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
TIMESFORMER = "h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"
COMPILED = "torch_compile_triton/trace.json.gz"
B200 = "b200/eager_trace.json.gz"


def _facts(db: duckdb.DuckDBPyConnection, trace: str) -> dict:
    cursor = db.execute("select * from workload_facts where trace_id = ?", [trace_id_of(db, trace)])
    columns = [d[0] for d in cursor.description]
    return dict(zip(columns, cursor.fetchone()))


def test_one_row_per_trace(db: duckdb.DuckDBPyConnection) -> None:
    assert db.execute("select count(*) from workload_facts").fetchone() == db.execute("select count(*) from traces").fetchone()


@pytest.mark.parametrize("trace", [BERT_H100, TIMESFORMER, RESNET])
def test_models_without_a_rotary_embedding_have_none(db, trace) -> None:
    facts = _facts(db, trace)
    assert facts["has_rotary"] is False and facts["rotary_example"] is None


def test_a_rotary_embedding_is_named_by_its_module_first(db) -> None:
    facts = _facts(db, QWEN_H100)
    assert facts["has_rotary"] is True and facts["rotary_example"] == "Qwen2RotaryEmbedding"


def test_compiled_means_most_gpu_time_runs_compiled_code(db) -> None:
    compiled, eager = _facts(db, COMPILED), _facts(db, B200)
    assert compiled["is_compiled"] is True and compiled["compiled_gpu_time_share"] >= 0.5
    # the eager vLLM step compiles a sliver (2 regions, one Triton kernel): not compiled
    assert eager["compiled_region_count"] == 2 and eager["compiled_kernel_count"] == 1
    assert eager["is_compiled"] is False and eager["compiled_gpu_time_share"] < 0.01
    assert eager["serving_engine_op_count"] > 0 and eager["serving_engine_op_example"]  # a vLLM op (_C_cache_ops::...)
    assert _facts(db, QWEN_H100)["is_compiled"] is False
