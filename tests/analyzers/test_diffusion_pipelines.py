"""Diffusion pipelines are named by where their GPU time goes, through compile and engine wrappers:
the synthetic traces of tests/data/diffusion (make_diffusion_traces.py) have each feature, and a twin
lacks it. The engine is named from the trace, and the GPU-graph advice is its own engine's only."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.conftest import DATA, TRACES, run_cli, trace_id_of
from tracelake.analyzers.model_id import ModelInfo, identify_model
from tracelake.analyzers.trace_overview import trace_phases, workload_facts
from tracelake.ingestion import ingest_paths
from tracelake.warehouse import Warehouse

DIFFUSION = DATA / "diffusion"
NAMES = ("sd3_xdit", "flux_compiled", "t5_encoder", "t5_encoder_decoder", "vit_patch_conv", "hybrid_conv_stem")


@pytest.fixture(scope="module")
def diffusion_db(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    warehouse = Warehouse(tmp_path_factory.mktemp("diffusion_warehouse"))
    report = ingest_paths([DIFFUSION / f"{name}.json.gz" for name in NAMES], warehouse, tags={"suite": "diffusion"},
                          jobs=2)
    assert not report.failed, report.failed
    con = warehouse.connect_read_only()
    yield con
    con.close()


def _trace_id(db: duckdb.DuckDBPyConnection, name: str) -> str:
    return db.execute("select trace_id from traces where source_path like ?", [f"%/{name}.json.gz"]).fetchone()[0]


@pytest.fixture(scope="module")
def identified(diffusion_db: duckdb.DuckDBPyConnection) -> dict[str, ModelInfo]:
    return {name: identify_model(diffusion_db, _trace_id(diffusion_db, name)) for name in NAMES}


def test_the_denoising_transformer_names_the_pipeline_behind_an_engine_wrapper(identified):
    info = identified["sd3_xdit"]
    # the transformer (92 % of the GPU time) behind xFuserSD3Transformer2DWrapper, not the text encoder
    # that starts first nor the wrapper
    assert info.model == "SD3Transformer2DModel pipeline" and info.is_pipeline
    assert info.architecture.startswith("Diffusion pipeline of 4 models: the denoiser SD3Transformer2DModel (x4, one "
                                        "call per denoising step, 92 % of their GPU time) is a Diffusion transformer (DiT)")
    parts = {c.module_class: c for c in info.components}
    assert list(parts) == ["SD3Transformer2DModel", "Decoder", "T5EncoderModel", "CLIPTextModelWithProjection"]
    assert parts["SD3Transformer2DModel"].calls == 4 and parts["SD3Transformer2DModel"].kernel_time_percent > 90
    assert parts["CLIPTextModelWithProjection"].calls == 2 and parts["T5EncoderModel"].kernel_time_percent < 2
    assert info.architecture.endswith("; its parts: Decoder 6 %, T5EncoderModel 1 %, CLIPTextModelWithProjection x2 1 %")
    # its own blocks: 3 JointTransformerBlock objects called 4 times, hidden 1536
    assert info.num_layers == 3 and info.hidden_size == 1536
    # the attention heads quoted are the transformer's (24 x 64), not T5's (64 x 64) nor CLIP's (12 x 64)
    assert (info.num_heads, info.head_dim) == (24, 64)


def test_a_compiled_transformer_without_block_frames_names_the_pipeline(identified):
    info = identified["flux_compiled"]
    # OptimizedModule -> FluxTransformer2DModel with no block frames (inlined in one compiled graph)
    assert info.model == "FluxTransformer2DModel pipeline"
    assert [c.module_class for c in info.components][0] == "FluxTransformer2DModel"
    assert info.components[0].calls == 4 and info.components[0].kernel_time_percent > 80
    # the attention heads quoted are the transformer's (24 x 128), not T5's (64 x 64)
    assert (info.num_heads, info.head_dim) == (24, 128)
    # its 3 GEMMs per call are read once per call (4 calls), not as 12 layers
    assert info.num_layers == 3 and 84e6 < info.parameter_estimate < 86e6


def test_steps_are_counted_per_transformer_call(diffusion_db):
    for name in ("sd3_xdit", "flux_compiled"):
        steps = trace_phases(diffusion_db, _trace_id(diffusion_db, name)).steps
        assert [s.model_calls for s in steps] == [4]
    sd3 = trace_phases(diffusion_db, _trace_id(diffusion_db, "sd3_xdit")).steps[0]
    assert sd3.phase == "denoise" and sd3.model_class == "SD3Transformer2DModel"
    # twin: a T5 encoder alone has one step of one call of its model
    t5 = trace_phases(diffusion_db, _trace_id(diffusion_db, "t5_encoder")).steps
    assert [s.model_calls for s in t5] == [1] and t5[0].phase is None


def test_the_engine_is_named_from_the_trace(diffusion_db):
    facts = {name: workload_facts(diffusion_db, _trace_id(diffusion_db, name)) for name in NAMES}
    assert facts["sd3_xdit"].serving_engine == "xDiT"  # xfuser/ frames before diffusers/
    assert facts["flux_compiled"].serving_engine == "diffusers"
    # aiter::_groupnorm_run is a kernel library's op: it makes no engine and no engine's switch
    assert facts["sd3_xdit"].serving_engine_op_count > 0
    assert facts["sd3_xdit"].serving_engine_graph_mode is None
    assert facts["t5_encoder"].serving_engine is None and facts["vit_patch_conv"].serving_engine is None


def test_an_encoder_of_an_encoder_decoder_family_is_an_encoder(identified):
    assert identified["t5_encoder"].architecture.startswith("Encoder-only Transformer")
    assert identified["t5_encoder_decoder"].architecture.startswith("Encoder-decoder Transformer")


def test_one_patch_convolution_leaves_a_transformer_a_transformer(identified):
    assert identified["vit_patch_conv"].architecture.startswith("Transformer (")
    assert identified["hybrid_conv_stem"].architecture.startswith("Hybrid (CNN + Transformer)")


def _analysis(tmp: Path, trace: Path) -> str:
    out = tmp / "out"
    result = run_cli("analyze", str(trace), "--warehouse", str(tmp / "wh"), "--out", str(out))
    assert result.returncode == 0, result.stderr
    return (out / "analysis.md").read_text()


def test_a_diffusion_pipeline_gets_no_serving_engine_graph_switch(tmp_path):
    text = _analysis(tmp_path, DIFFUSION / "sd3_xdit_launch_bound.json.gz")
    assert "Capture the steady-state step in a GPU graph (CUDA / HIP graphs" in text
    assert "enforce_eager" not in text and "disable-cuda-graph" not in text
    assert "| denoise | 4 (SD3Transformer2DModel calls in 1 request) |" in text
    assert "- **Engine**: xDiT\n" in text


def test_the_vllm_step_gets_vllms_graph_switch(tmp_path):
    text = _analysis(tmp_path, TRACES / "b200" / "eager_trace.json.gz")
    assert "Run the step in vLLM's GPU-graph mode (vLLM without `enforce_eager`" in text
    assert "disable-cuda-graph" not in text and "- **Engine**: vLLM\n" in text


def test_the_serving_engines_of_the_shared_traces_are_named(db):
    engines = {path: workload_facts(db, trace_id_of(db, path)) for path in (
        "b200/eager_trace.json.gz", "inference/vllm_decode_full/graph_execution.json.gz",
        "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz", "h100/gaunernst_bert-small-uncased__1016001.json.gz")}
    assert engines["b200/eager_trace.json.gz"].serving_engine == "vLLM"
    assert engines["inference/vllm_decode_full/graph_execution.json.gz"].serving_engine == "vLLM"
    # the SGLang step is also wrapped in a vLLM-style `execute_...` annotation: its own frames name it
    sglang = engines["inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"]
    assert sglang.serving_engine == "SGLang" and sglang.serving_engine_graph_mode == "SGLang without `--disable-cuda-graph`"
    # a Hugging Face model run by a script: transformers is a model library, not an engine
    assert engines["h100/gaunernst_bert-small-uncased__1016001.json.gz"].serving_engine is None
