"""Model identification reads the model out of real traces (module names, weight shapes, dtypes)."""

from __future__ import annotations

import pytest

from tests.conftest import trace_id_of
from tracelake.analyzers.model_id import UNKNOWN, ModelInfo, identify_model

BERT = ("h100/gaunernst_bert-small-uncased__1016001.json.gz", "mi300/gaunernst_bert-small-uncased__1016001.json.gz")
TIMESFORMER = "h100/facebook_timesformer-base-finetuned-k400__1016002.json.gz"
QWEN = ("h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz", "mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")


@pytest.fixture(scope="module")
def identified(db) -> dict[str, ModelInfo]:
    traces = (*BERT, *QWEN, "mi300/resnet_act_checkpoint.json.gz", "torch_compile_triton/trace.json.gz",
              "b200/eager_trace.json.gz", "mi210/gpu_only_trace/gpu_only_trace.json.gz", TIMESFORMER,
              "inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz")
    return {path: identify_model(db, trace_id_of(db, path)) for path in traces}


@pytest.mark.parametrize("path", BERT)
def test_bert_small(identified, path):
    info = identified[path]
    assert info.model_family == "BERT"
    assert info.model_name == "BERT-small"
    assert info.architecture.startswith("Encoder-only Transformer")
    assert (info.hidden_size, info.num_layers, info.num_heads, info.head_dim) == (512, 4, 8, 64)
    assert (info.ffn_size, info.vocab_size) == (2048, 30522)
    # 4 x (4 x 512^2 + 2 x 512 x 2048) + embeddings (30522 + 512 + 2) x 512 + head transform, biases:
    # BERT-small's published size is ~29M parameters
    assert 27e6 < info.parameter_estimate < 30e6
    assert info.precision == "BF16"
    assert info.confidence == "high"
    assert "hidden 512" in info.scale and "4 layers" in info.scale
    assert info.display_name == "BERT-small"


@pytest.mark.parametrize("path", QWEN)
def test_qwen_0_5b(identified, path):
    info = identified[path]
    assert info.model_family == "Qwen"
    assert info.model_name == "Qwen1.5-0.5B"  # Qwen2 module classes, Qwen1.5 shapes (Qwen2-0.5B is 896 wide)
    assert info.architecture.startswith("Decoder-only Transformer")
    assert "RMSNorm" in info.architecture and "rotary" in info.architecture
    assert (info.hidden_size, info.num_layers, info.num_heads, info.num_kv_heads, info.head_dim) == (1024, 24, 16, 16, 64)
    assert (info.ffn_size, info.vocab_size) == (2816, 151936)
    # 24 x 12.85M layer weights + 151936 x 1024 embedding (the trace has no separate output head)
    assert 0.45e9 < info.parameter_estimate < 0.48e9
    assert info.precision == "BF16"
    assert info.scale.startswith("~0.46B parameters")


def test_resnet(identified):
    info = identified["mi300/resnet_act_checkpoint.json.gz"]
    assert info.model_family == "ResNet"
    assert info.model_name == "ResNet-18"  # 8 BasicBlocks; activation-checkpoint recomputes counted once
    assert info.architecture.startswith("Convolutional neural network")
    assert "batch normalization" in info.architecture
    assert info.num_layers == 18
    assert 11.5e6 < info.parameter_estimate < 11.8e6  # ResNet-18: 11.7M
    assert "20 convolution layers" in info.scale and "1000-way classifier head" in info.scale
    assert info.hidden_size is None and info.num_heads is None  # no transformer numbers for a CNN
    assert info.precision == "BF16"


def test_compiled_transformer_block(identified):
    info = identified["torch_compile_triton/trace.json.gz"]
    assert info.model_family == UNKNOWN  # no module names in a compiled region
    assert info.architecture.startswith("Transformer block")
    assert "torch.compile" in info.architecture
    assert (info.hidden_size, info.ffn_size, info.num_heads, info.head_dim, info.num_layers) == (2048, 8192, 16, 128, 1)
    assert info.vocab_size is None  # the 2048 -> 8192 GEMM is the FFN up-projection, not an output head
    assert info.parameter_estimate == 4 * 2048 * 2048 + 3 * 2048 * 8192
    assert info.display_name == "Workload"


def test_vllm_moe_model(identified):
    info = identified["b200/eager_trace.json.gz"]
    assert info.model_family == "GPT-OSS"
    assert info.model_name == "gpt-oss-120b"
    assert "Mixture-of-Experts" in info.architecture
    assert info.tensor_parallel == 8
    assert (info.hidden_size, info.num_layers, info.num_experts) == (2880, 36, 128)
    assert (info.num_heads, info.num_kv_heads, info.head_dim) == (64, 8, 64)  # 8 / 1 per rank at TP 8
    assert info.vocab_size == 201088
    assert info.parameter_estimate is None  # expert weights live inside fused kernels
    assert info.precision.startswith("Mixed") and "FP4" in info.precision and "FP8" in info.precision
    # an eager serving step that compiles only a sliver (2 regions, one 2 us Triton kernel) is not "compiled"
    assert "torch.compile" not in info.architecture


def test_gpu_only_trace(identified):
    info = identified["mi210/gpu_only_trace/gpu_only_trace.json.gz"]
    assert info.model_family == UNKNOWN
    assert info.scale == UNKNOWN
    assert info.architecture.startswith("Convolutional neural network")  # from the kernel names alone
    assert info.precision == "BF16"
    assert info.confidence == "low"
    assert any("GPU-only" in e for e in info.evidence)
    assert info.seed_json() == {"model": UNKNOWN, "architecture": info.architecture, "scale": UNKNOWN,
                                "precision": "BF16"}


def test_evidence_sql_runs(db, identified):
    info = identified[BERT[0]]
    assert info.evidence and info.evidence_sql
    for sql in info.evidence_sql:
        assert "$trace_id" not in sql
        db.execute(sql).fetchall()


def _outermost_with_most_kernel_time(db, trace_id: str) -> str:
    """The depth-0 module class (under data-parallel wrappers) with the most GPU kernel time."""
    return db.execute("""
        select module_class from module_calls
        where trace_id = ? and module_class not in ('DistributedDataParallel', 'Sequential')
          and (depth = 0 or module_chain[1] = 'DistributedDataParallel' and depth = 1)
        group by 1 order by sum(kernel_time_us) desc limit 1""", [trace_id]).fetchone()[0]


@pytest.mark.parametrize("path", (TIMESFORMER, "b200/eager_trace.json.gz", "mi300/resnet_act_checkpoint.json.gz", *BERT))
def test_the_outermost_model_class_names_the_model(db, identified, path):
    info = identified[path]
    outermost = _outermost_with_most_kernel_time(db, trace_id_of(db, path))
    assert [c.module_class for c in info.components] == [outermost] and not info.is_pipeline
    assert any(f"`{outermost}`" in e and "names the model" in e for e in info.evidence)
    assert info.model != UNKNOWN and info.seed_json()["model"] == info.model


def test_a_model_without_a_family_rule_is_named_by_its_class(identified):
    info = identified[TIMESFORMER]  # TimesformerForVideoClassification: no rule in the family seed
    assert info.model == info.display_name == "TimesformerForVideoClassification"
    assert info.model_family == "Timesformer" and info.num_layers == 12 and info.confidence == "high"


def test_module_names_outside_the_model_do_not_name_it(identified):
    info = identified["inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz"]  # only `Sampler`: no layers
    assert info.components == [] and info.model == UNKNOWN and info.display_name == "Workload"


def test_a_pipeline_is_described_as_one(scope_db, scope_traces):
    trace_id = scope_db.execute("select trace_id from traces where source_path = ?",
                                [str(scope_traces.pipeline.resolve())]).fetchone()[0]
    info = identify_model(scope_db, trace_id)
    roots = dict(scope_db.execute("select module_class, sum(kernel_time_us) from module_calls "
                                  "where trace_id = ? and depth = 0 group by 1", [trace_id]).fetchall())
    main = max(roots, key=roots.__getitem__)
    assert info.is_pipeline and {c.module_class for c in info.components} == set(roots)
    assert info.components[0].module_class == main and info.model == f"{main} pipeline"
    assert info.display_name == info.model and not info.model.startswith("T5")
    assert sum(c.kernel_time_percent for c in info.components) == pytest.approx(100.0, abs=0.2)
    assert info.architecture.startswith("Pipeline of 2 models") and f"goes to {main}" in info.architecture
    assert info.num_layers == 2  # the main component's layers, not the whole trace's four
    assert set(info.seed_json()) == {"model", "architecture", "scale", "precision"}
