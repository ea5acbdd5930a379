"""`int_serving_step_annotations`: serving-step annotations parsed into batch, phase and the
per-request attention aggregates, on the real vLLM, SGLang and B200 serving traces."""

from __future__ import annotations

import duckdb

from tests.conftest import trace_id_of

VLLM_REPLAY = "inference/vllm_decode_full/graph_execution.json.gz"
SGLANG_REPLAY = "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"
B200 = "b200/eager_trace.json.gz"

COLUMNS = ("framework, annotation_format, phase, batch_size, context_requests, generation_requests, "
           "c_sq, c_sk, c_sqsq, c_sqsk, g_sq, g_sk, g_sqsq, g_sqsk, has_attention_aggregates, enclosing_event_idx")


def _steps(db: duckdb.DuckDBPyConnection, trace: str) -> list[tuple]:
    return db.execute(f"select event_idx, {COLUMNS} from intermediate.int_serving_step_annotations "
                      "where trace_id = ? order by event_idx", [trace_id_of(db, trace)]).fetchall()


def test_vllm_detailed_decode_step(db: duckdb.DuckDBPyConnection) -> None:
    # execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)
    assert _steps(db, VLLM_REPLAY) == [
        (0, "vllm", "vllm_detailed", "decode", 32, 0, 32, 0, 0, 0, 0, 32, 55086, 32, 55086, True, None)]


def test_sglang_trace_has_its_step_inside_the_vllm_style_annotation(db: duckdb.DuckDBPyConnection) -> None:
    # execute_32_context_0(...)_generation_32(sq32sk32785sqsq32sqsk32785) encloses step[DECODE bs=32],
    # which prints no aggregates
    assert _steps(db, SGLANG_REPLAY) == [
        (0, "vllm", "vllm_detailed", "decode", 32, 0, 32, 0, 0, 0, 0, 32, 32785, 32, 32785, True, None),
        (7, "sglang", "sglang", "decode", 32, 0, 32, None, None, None, None, None, None, None, None, False, 0)]


def test_vllm_native_prefill_step(db: duckdb.DuckDBPyConnection) -> None:
    # execute_context_1(888_788544)_generation_0(0): one 888-token prompt (888² = 788544); the
    # cached prefix is not printed, so c_sk and c_sqsk stay unknown rather than guessed
    assert _steps(db, B200) == [
        (0, "vllm", "vllm_native", "prefill", 1, 1, 0, 888, None, 788544, None, 0, 0, 0, 0, False, None)]
