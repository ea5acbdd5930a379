"""Serving-op perf models (issue 14) on the real graph-capture traces and the B200 eager vLLM step:
each model works one real op instance by hand and matches TraceLens' inference-mode sheets
(`perf_csvs/unified_perf_summary.csv`, RMSNorm_fwd / RoPE_fwd / UnaryElementwise /
InferenceAttention_fwd / MoE_unfused_fwd) to 1e-3 where TraceLens has the row."""

from __future__ import annotations

import json

import duckdb
import pytest

from tests.conftest import DATA, trace_id_of
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

CAPTURES = DATA / "captures"
SGLANG_CAPTURE = CAPTURES / "inference__sglang_decode" / "bs_32_rank0.json.gz"
VLLM_CAPTURE = CAPTURES / "inference__vllm_decode_full" / "graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"
B200 = "b200/eager_trace.json.gz"
MB = 1024 * 1024


@pytest.fixture(scope="module")
def capture_db(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """The two capture traces, ingested on their own (ordinary traces with shapes, few kernels)."""
    wh = Warehouse(tmp_path_factory.mktemp("serving_captures"))
    report = ingest_paths([SGLANG_CAPTURE, VLLM_CAPTURE], wh, tags={"suite": "tests"}, jobs=2)
    assert not report.failed, report.failed
    return wh.connect_read_only()


def _model(db: duckdb.DuckDBPyConnection, name: str, dims: str, trace_id: str | None = None) -> tuple[float, float, dict]:
    """(flops, bytes, perf_params) of the op instances with this name and Input Dims; all equal."""
    rows = db.execute(
        """select distinct p.flops, p.bytes, p.perf_params
           from intermediate.int_op_perf_models p
           join staging.stg_trace__host_ops h on h.trace_id = p.trace_id and h.event_idx = p.op_id
           where h.name = ? and h.input_dims = ? and (? is null or h.trace_id = ?)""",
        [name, dims, trace_id, trace_id]).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0], rows[0][1], json.loads(rows[0][2])


def test_rmsnorm(capture_db) -> None:
    # aiter::rmsnorm(out, x [32, 4096], w [4096], eps): N = 131072, C = 4096, 32 rows
    # flops = 4N + 2·rows = 524288 + 64; bytes = (2N + C)·2 = 532480 (TraceLens: 0.000524352 GFLOPS, 0.5078125 MB)
    flops, bytes_, _ = _model(capture_db, "aiter::rmsnorm", "[[32,4096],[32,4096],[4096],[]]")
    assert flops == 4 * 131072 + 2 * 32 == pytest.approx(0.000524352e9, rel=1e-3)
    assert bytes_ == (2 * 131072 + 4096) * 2 == pytest.approx(0.5078125 * MB, rel=1e-3)
    # per-head q/k norm [256, 128]: TraceLens 0.000131584 GFLOPS, 0.125244140625 MB
    flops, bytes_, _ = _model(capture_db, "aiter::rmsnorm", "[[256,128],[256,128],[128],[]]")
    assert (flops, bytes_) == (4 * 32768 + 2 * 256, (2 * 32768 + 128) * 2)
    assert flops == pytest.approx(0.000131584e9, rel=1e-3) and bytes_ == pytest.approx(0.125244140625 * MB, rel=1e-3)


def test_fused_add_rmsnorm_counts_the_residual(capture_db) -> None:
    # aiter::add_rmsnorm(out, x, residual_in, residual_out [32, 4096], w, eps): +N adds, residual read + written
    # flops = 5N + 2·rows = 655360 + 64; bytes = (4N + C)·2 = 1056768 (TraceLens 0.000655424 GFLOPS, 1.0078125 MB)
    flops, bytes_, params = _model(capture_db, "aiter::add_rmsnorm",
                                   "[[32,4096],[32,4096],[32,4096],[32,4096],[4096],[]]")
    assert params["fused_residual_add"] is True
    assert flops == 5 * 131072 + 64 == pytest.approx(0.000655424e9, rel=1e-3)
    assert bytes_ == (4 * 131072 + 4096) * 2 == pytest.approx(1.0078125 * MB, rel=1e-3)
    # vLLM: aiter::rmsnorm2d_fwd_with_add_ck [32, 2880]: N = 92160 (TraceLens 0.000460864 GFLOPS, 0.7086181640625 MB)
    flops, bytes_, _ = _model(capture_db, "aiter::rmsnorm2d_fwd_with_add_ck",
                              "[[32,2880],[32,2880],[32,2880],[32,2880],[2880],[],[]]")
    assert flops == 5 * 92160 + 64 == pytest.approx(0.000460864e9, rel=1e-3)
    assert bytes_ == (4 * 92160 + 2880) * 2 == pytest.approx(0.7086181640625 * MB, rel=1e-3)


def test_rotary_embedding(capture_db) -> None:
    # sgl_kernel::rotary_embedding(pos [32], q [32, 4096], k [32, 1024], 128, cache, True):
    # 163840 rotated elements, 3 FLOPs each, read + write bf16 (TraceLens 0.00049152 GFLOPS, 0.625 MB)
    flops, bytes_, params = _model(capture_db, "sgl_kernel::rotary_embedding",
                                   "[[32],[32,4096],[32,1024],[],[41216,128],[]]")
    assert params["num_elements"] == 32 * 4096 + 32 * 1024 == 163840
    assert flops == 3 * 163840 == pytest.approx(0.00049152e9, rel=1e-3)
    assert bytes_ == 2 * 163840 * 2 == pytest.approx(0.625 * MB, rel=1e-3)
    # vLLM's _C::rotary_embedding (TraceLens leaves it in `other`, no row): q [32, 4096], k [32, 512]
    flops, bytes_, _ = _model(capture_db, "_C::rotary_embedding", "[[32],[32,4096],[32,512],[],[131072,64],[]]")
    assert (flops, bytes_) == (3 * 147456, 4 * 147456)


def test_silu_and_mul(capture_db) -> None:
    # sgl_kernel::silu_and_mul(out [32, 12288], x [32, 24576]): 5 FLOPs per output element,
    # bytes = (393216 + 786432)·2 (TraceLens 0.00196608 GFLOPS, 2.25 MB)
    flops, bytes_, _ = _model(capture_db, "sgl_kernel::silu_and_mul", "[[32,12288],[32,24576]]")
    assert flops == 5 * 393216 == pytest.approx(0.00196608e9, rel=1e-3)
    assert bytes_ == (393216 + 786432) * 2 == pytest.approx(2.25 * MB, rel=1e-3)


def test_kv_cache_write(capture_db) -> None:
    # sglang::store_cache(k [32, 1024], v [32, 1024], k_cache, v_cache, slots): read k, v and write
    # them to the cache: 2·32768·(2 + 2) bytes (TraceLens 0 GFLOPS, 0.25 MB)
    flops, bytes_, _ = _model(capture_db, "sglang::store_cache",
                              "[[32,1024],[32,1024],[835874,1024],[835874,1024],[32],[],[]]")
    assert flops == 0 and bytes_ == 2 * 32768 * 4 == pytest.approx(0.25 * MB, rel=1e-3)


def test_fused_moe_on_the_vllm_capture(capture_db) -> None:
    # vllm::moe_forward(x [32, 3072], router_logits [32, 32]): M = 32, K = 3072 (2880 padded), E = 32;
    # topk 4 and N = 2880 -> 3072 from model_configs (gpt-oss-20b), gated.
    # flops = 2·M·K·2N·topk + 2·M·N·K·topk + M·K·(2·topk - 1) = 4831838208 + 2415919104 + 688128;
    # TraceLens splits it into pseudo_op up (4.831838208 GFLOPS) + down (2.415919104): the sum matches to 1e-4
    flops, bytes_, params = _model(capture_db, "vllm::moe_forward", "[[32,3072],[32,32],[],[]]")
    assert (params["topk"], params["inter_dim"], params["num_experts"]) == (4, 3072, 32)
    assert params["topk_inter_dim_source"] == "model_configs: gpt-oss-20b"
    assert flops == 4831838208 + 2415919104 + 32 * 3072 * 7
    assert flops == pytest.approx((4.831838208 + 2.415919104) * 1e9, rel=1e-3)
    # no kernel in the capture shows the FP4 weights, so the model says it fell back to the input dtype
    assert params["weight_precision_source"] == "input dtype (no kernel shows it)"
    active = 32 * (1 - (28 / 32) ** 32)  # 31.554 expected active experts (uniform routing)
    assert bytes_ == pytest.approx(2 * 32 * 3072 * 2 + active * 3 * 3072 * 3072 * 2, rel=1e-9)


def test_fused_moe_on_the_b200_eager_step(db) -> None:
    # vllm::moe_forward(x [888, 3072], logits [888, 128]): gpt-oss-120b (128 experts, top-4), FP4 weights
    # from the trtllm kernels' names (MxE2m1); all 128 experts are active for 888 tokens. The trace is
    # one rank of 8 (distributedInfo world_size 8): each rank holds 2880 / 8 = 360 of every expert's
    # width, padded to 512 like the hidden width (2880 -> 3072)
    flops, bytes_, params = _model(db, "vllm::moe_forward", "[[888,3072],[888,128],[]]", trace_id_of(db, B200))
    m, k, n = 888, 3072, 512
    assert params["tensor_parallel"] == 8 and params["inter_dim"] == n
    assert params["weight_precision"] == "fp4" and params["weight_precision_source"] == "kernel names"
    assert flops == 2 * m * k * 2 * n * 4 + 2 * m * n * k * 4 + m * k * 7
    active = 128 * (1 - (124 / 128) ** 888)
    assert bytes_ == pytest.approx(2 * m * k * 2 + active * 3 * k * n * 0.5, rel=1e-9)


def _attention(db: duckdb.DuckDBPyConnection, h_q: int, h_kv: int, d: int, step: str) -> tuple[float, float]:
    """The dbt InferenceAttention model's SQL over one hand-built op inside one real annotation."""
    row = db.execute(
        """select h_q * (2.0 * c_sqsk * d + 2.0 * c_sqsk * d) - h_q * (1.0 * c_sqsq * d + 1.0 * c_sqsq * d)
                  + h_q * (2.0 * g_sqsk * d + 2.0 * g_sqsk * d),
                  ((c_sq + g_sq) * (2.0 * h_q * d + 2.0 * h_kv * d) + ((c_sk - c_sq) + (g_sk - g_sq)) * 2.0 * h_kv * d) * 2
           from intermediate.int_serving_step_annotations, (select ? as h_q, ? as h_kv, ? as d)
           where name = ?""", [h_q, h_kv, d, step]).fetchone()
    return row[0], row[1]


def test_inference_attention_formula_on_the_replay_annotations(db) -> None:
    # vLLM decode: unified_attention_with_output q [32, 64, 64], k/v [32, 8, 64]; step
    # g_sq 32, g_sk 55086, g_sqsk 55086: flops = 64·4·55086·64 = 902529024;
    # bytes = 32·(2·64·64 + 2·8·64)·2 + (55086 - 32)·8·128·2 (TraceLens 0.902529024 GFLOPS, 108.08984375 MB)
    vllm = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"
    flops, bytes_ = _attention(db, 64, 8, 64, vllm)
    assert flops == 64 * 4 * 55086 * 64 == pytest.approx(0.902529024e9, rel=1e-3)
    assert bytes_ == 32 * (2 * 64 * 64 + 2 * 8 * 64) * 2 + 55054 * 8 * 128 * 2 == pytest.approx(108.08984375 * MB, rel=1e-3)
    # SGLang decode: paged_attention_ragged q [32, 32, 128], KV cache [.., 1, 8, 128]; g_sk 32785
    # (TraceLens 0.53714944 GFLOPS, 128.56640625 MB)
    sglang = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)"
    flops, bytes_ = _attention(db, 32, 8, 128, sglang)
    assert flops == pytest.approx(0.53714944e9, rel=1e-3)
    assert bytes_ == pytest.approx(128.56640625 * MB, rel=1e-3)


def test_attention_without_annotation_aggregates_has_no_model(db) -> None:
    # the B200 step's `execute_context_1(888_788544)_generation_0(0)` does not print the cached prefix,
    # so its unified attention gets no FLOPs rather than a guess
    rows = db.execute(
        """select count(*) from intermediate.int_op_perf_models p
           join staging.stg_trace__host_ops h on h.trace_id = p.trace_id and h.event_idx = p.op_id
           where h.trace_id = ? and h.name = 'vllm::unified_attention_with_output'""", [trace_id_of(db, B200)]).fetchone()
    assert rows == (0,)
