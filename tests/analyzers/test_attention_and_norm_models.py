"""Issue 26, items 5 and 6, on the synthetic traces of tests/data/perf_models (make_traces.py): perf
models worked by hand for one shape each (formula sources in int_op_perf_models.sql), one method for
unfused attention on a CUDA and a ROCm device, and a micro-benchmark's kernel statement."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import DATA
from tracelake.analyzers import settings
from tracelake.analyzers.common import expected_attention_band
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.warehouse import Warehouse

TRACES = DATA / "perf_models"
NAMES = ("owl_attention_h100", "owl_attention_mi300x", "owl_attention_long_chain_h100", "sage_attention_mi300x",
         "mha_batch_prefill_mi300x",
         "vllm_mixed_attention_mi300x", "norms_mi300x", "microbench_norm_mi300x")
BF16 = 2
# H100 SXM5 / MI300X dense BF16 matrix peaks (seeds/platform_peaks.csv): the only thing the OWLv2 twins
# differ in for the fused-attention FLOP model
PEAK_RATIO = 989.4 / 708.0


@dataclass(frozen=True)
class Analyzed:
    trace_id: str
    out: Path
    findings: list[dict[str, Any]]
    markdown: str
    quality: dict[str, str]


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Analyzed], duckdb.DuckDBPyConnection]:
    warehouse = Warehouse(tmp_path_factory.mktemp("perf_models_wh"))
    out_root = tmp_path_factory.mktemp("perf_models_out")
    done = {}
    for name in NAMES:
        out = out_root / name
        outcome = run_analysis(TRACES / f"{name}.json.gz", warehouse, AnalyzeOptions(out_dir=out, jobs=1))
        quality = json.loads((out / "metadata" / "trace_quality.json").read_text())
        done[name] = Analyzed(outcome.trace_id, out, json.loads((out / "priority_data.json").read_text())["findings"],
                              (out / "analysis.md").read_text(),
                              {c["check_name"]: c["verdict"] for c in quality["checks"]})
    return done, warehouse.connect_read_only()


def _model(analyzed_traces, trace: str, op: str, concrete_like: str = "%") -> tuple[float, float, str, dict[str, Any]]:
    """(flops, bytes, compute_spec, perf_params) of the op's instances in the trace (whose Concrete
    Inputs match `concrete_like`); all equal."""
    done, db = analyzed_traces
    rows = db.execute(
        """select distinct p.flops, p.bytes, p.compute_spec, p.perf_params
           from intermediate.int_op_perf_models p
           join staging.stg_trace__host_ops h on h.trace_id = p.trace_id and h.event_idx = p.op_id
           where h.trace_id = ? and h.name = ? and h.concrete_inputs like ?""",
        [done[trace].trace_id, op, concrete_like]).fetchall()
    assert len(rows) == 1, (op, rows)
    return rows[0][0], rows[0][1], rows[0][2], json.loads(rows[0][3])


# ---- normalization ---------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["aten::group_norm", "aten::native_group_norm", "aten::instance_norm",
                                "aiter::_groupnorm_run"])
def test_group_and_instance_norm_forward(analyzed, op: str) -> None:
    # x [8, 512, 64, 64] bf16, C = dim 1 = 512 (TraceLens GroupNorm / InstanceNorm), training:
    # flops = 3C + 3N + 3C + 2N; bytes = (2N + 6C)·2
    n, c = 8 * 512 * 64 * 64, 512
    flops, bytes_, spec, params = _model(analyzed, "norms_mi300x", op)
    assert params["num_channels"] == c
    assert flops == 3 * c + 3 * n + 3 * c + 2 * n == 83_889_152
    assert bytes_ == (2 * n + 6 * c) * BF16 == 67_115_008
    assert spec == "vector_bf16"


def test_layer_norm_backward(analyzed) -> None:
    # native_layer_norm_backward(grad [16, 1024, 2048], x, [2048], mean, rstd, w, b, [True, True, True]):
    # flops 4N + 5N (input gradient); bytes grad N + x N + grad_x N + stats C + w C + dw C + db C
    n, c = 16 * 1024 * 2048, 2048
    flops, bytes_, _, params = _model(analyzed, "norms_mi300x", "aten::native_layer_norm_backward", "%[True, True, True]%")
    assert (params["is_affine"], params["has_bias"], params["input_grad"]) == (True, True, True)
    assert flops == 9 * n == 301_989_888
    assert bytes_ == (3 * n + 4 * c) * BF16 == 201_342_976
    # no weight, bias or input gradient: flops 4N + 2N; bytes grad N + x N + stats C
    flops, bytes_, _, params = _model(analyzed, "norms_mi300x", "aten::native_layer_norm_backward", "%[False, True, True]%")
    assert (params["is_affine"], params["has_bias"], params["input_grad"]) == (False, False, False)
    assert flops == 6 * n and bytes_ == (2 * n + c) * BF16


def test_group_norm_backward(analyzed) -> None:
    # native_group_norm_backward(grad [8, 512, 64, 64], x, mean, rstd, w, N, C, HxW, 32, [True]*3): C = 512
    n, c = 8 * 512 * 64 * 64, 512
    flops, bytes_, _, _ = _model(analyzed, "norms_mi300x", "aten::native_group_norm_backward")
    assert flops == 9 * n == 150_994_944
    assert bytes_ == (3 * n + 4 * c) * BF16 == 100_667_392


def test_rms_norm_forward_and_backward(analyzed) -> None:
    n, c = 16 * 1024 * 2048, 2048
    # _fused_rms_norm(x, [2048], w, eps): (N/C)·(2C + 2) + 2N FLOPs; bytes (2N + C)·2
    flops, bytes_, _, _ = _model(analyzed, "norms_mi300x", "aten::_fused_rms_norm")
    assert flops == (n // c) * (2 * c + 2) + 2 * n == 134_250_496
    assert bytes_ == (2 * n + c) * BF16 == 134_221_824
    # _fused_rms_norm_backward(grad, x, [2048], rstd, w, [True, True]): no bias
    flops, bytes_, _, params = _model(analyzed, "norms_mi300x", "aten::_fused_rms_norm_backward")
    assert params["has_bias"] is False
    assert flops == 9 * n and bytes_ == (3 * n + 3 * c) * BF16 == 201_338_880


def test_aiter_groupnorm_is_a_norm_not_other(analyzed) -> None:
    done, db = analyzed
    (category,) = db.execute("select category from op_categories where op_name = 'aiter::_groupnorm_run'").fetchone()
    assert category == "NORM_fwd"
    norm = [f for f in done["norms_mi300x"].findings if f["agent"] == "norm"]
    assert any(f["title"].startswith("aiter::_groupnorm_run") for f in norm), [f["title"] for f in norm]


# ---- attention perf models ------------------------------------------------------------------------


def test_sage_attention(analyzed) -> None:
    # qk_int8_sv_f8_accum_f32_attn(q, k [1, 4096, 24, 128] int8 NHD, v fp8, o bf16, ...): flops
    # 4·B·H·N²·D; bytes Q + K + V at 1 byte, O at 2
    b, n, h, d = 1, 4096, 24, 128
    flops, bytes_, spec, params = _model(analyzed, "sage_attention_mi300x", "sageattention::qk_int8_sv_f8_accum_f32_attn")
    assert (params["N_Q"], params["H_Q"], params["causal"]) == (n, h, False)
    assert flops == 4 * b * h * n * n * d == 206_158_430_208
    assert bytes_ == b * n * h * d * (1 + 1 + 1 + 2) == 62_914_560
    assert spec == "matrix_int8"


def test_sage_kernels_are_attention(analyzed) -> None:
    """sage_quant_kernel and sage_fwd (aiter's Triton SageAttention) count as attention, owned by the
    attention agent with the op's roofline."""
    done, db = analyzed
    rows = db.execute("select distinct name, kernel_type, kernel_category from kernels where trace_id = ? order by name",
                      [done["sage_attention_mi300x"].trace_id]).fetchall()
    assert rows == [("sage_fwd", "attention", "SDPA"), ("sage_quant_kernel", "attention", "SDPA")]
    top = done["sage_attention_mi300x"].findings[0]
    assert top["agent"] == "sdpa" and top["estimate_method"] == "quantified", top["title"]


def test_fused_attention_credit_is_the_gap_to_its_band_times_its_time(analyzed) -> None:
    """Sage attention is fused attention: its credit is (1 - efficiency / top of the band at its sequence
    length and head dim) x its share of E2E x the mid target, nothing else (SD3.5's flash attention at 40 %
    of roofline against a 50 % band is credited 0.875 x 20 % of its time)."""
    done, _ = analyzed
    top = done["sage_attention_mi300x"].findings[0]
    assert "Fused (sage) attention" in top["insight"]
    band_high = expected_attention_band(4096, 128)[2]
    assert band_high == 66.0  # N = 4096 band 50-70 %, capped at head dim 128 by 37-66 %
    per_call_us, calls = 120.0 + 900.0, 4  # sage_quant_kernel + sage_fwd, launched by the op
    efficiency = 100.0 * 206_158_430_208 / (2600e12 * per_call_us * 1e-6)  # MI300X int8 matrix peak
    e2e_ms = json.loads((done["sage_attention_mi300x"].out / "priority_data.json").read_text())["e2e_time_ms"]
    share = 100.0 * calls * per_call_us / 1000.0 / e2e_ms
    assert top["impact_score"] == pytest.approx(settings.TARGET_MID * (1 - efficiency / band_high) * share, rel=1e-3)


def test_mha_batch_prefill(analyzed) -> None:
    # aiter::mha_batch_prefill(q [2048, 32, 128], k_cache [4096, 16, 8, 128], v_cache) in a step of 2
    # prompts of 1,024 tokens (c_sq = c_sk = 2048, c_sqsq = c_sqsk = 2·1024²): TraceLens InferenceAttention
    h_q, h_kv, d, sq, sqsq = 32, 8, 128, 2048, 2 * 1024 * 1024
    flops, bytes_, _, params = _model(analyzed, "mha_batch_prefill_mi300x", "aiter::mha_batch_prefill")
    assert (params["H_Q"], params["H_KV"], params["d_h_v"]) == (h_q, h_kv, d)
    assert flops == h_q * (4 * sqsq * d) - h_q * (2 * sqsq * d) == 17_179_869_184
    assert bytes_ == sq * (2 * h_q * d + 2 * h_kv * d) * BF16 == 41_943_040


# ---- one method for unfused attention --------------------------------------------------------------


def _attention_finding(analyzed_traces, trace: str) -> dict[str, Any]:
    done, _ = analyzed_traces
    found = [f for f in done[trace].findings if "softmax" in " ".join(f["operations"])]
    assert len(found) == 1, [(f["agent"], f["title"]) for f in found]
    return found[0]


def test_unfused_attention_has_one_method_on_every_vendor(analyzed) -> None:
    """The same OWLv2-like encoder on H100 and MI300X: one finding of the same kind from the fused
    kernel's FLOP model on both, although the ROCm twin's same-stream overlaps lower its confidence
    (before: a per-op roofline gap on MI300X counting the softmax as a 100 % gap)."""
    done, _ = analyzed
    assert done["owl_attention_mi300x"].quality["same_stream_overlaps"] == "warn"
    assert done["owl_attention_h100"].quality["same_stream_overlaps"] == "pass"
    cuda, rocm = _attention_finding(analyzed, "owl_attention_h100"), _attention_finding(analyzed, "owl_attention_mi300x")
    for f in (cuda, rocm):
        assert f["agent"] == "kernel_fusion" and f["global_rank"] == 1 and f["estimate_method"] == "quantified"
        assert "one fused attention kernel would take about" in f["insight"]
    assert set(cuda["operations"]) == set(rocm["operations"])
    fused = [f["claimed_time_ms"] - f["recoverable_ms"] for f in (cuda, rocm)]
    # the fused time is FLOPs / (peak x band): the twins differ only by their BF16 peaks (2 %)
    assert fused[1] / fused[0] == pytest.approx(PEAK_RATIO, rel=0.02)
    assert abs(cuda["impact_score"] - rocm["impact_score"]) <= 10.0  # % of E2E, the peaks' difference


def test_the_attention_agents_eager_finding_uses_the_same_flop_model(analyzed) -> None:
    """Six ops on the scores put the softmax beyond the kernel-fusion window, so the attention agent
    finds the chain itself: its fused time is the same FLOP model's (bmm FLOPs / (peak x band)), not the
    GEMMs' roofline over the chain with the softmax counted as a 100 % gap."""
    fusion, eager = _attention_finding(analyzed, "owl_attention_h100"), _attention_finding(
        analyzed, "owl_attention_long_chain_h100")
    assert eager["agent"] == "sdpa" and eager["estimate_method"] == "quantified"
    assert "one fused attention kernel would take about 0.966-1.464 ms" in eager["insight"]
    assert "of the roofline" not in eager["insight"]  # no members' efficiency beside the FLOP model
    fused = [f["claimed_time_ms"] - f["recoverable_ms"] for f in (fusion, eager)]
    assert fused[1] == pytest.approx(fused[0], rel=1e-3)
    flops = 2 * 2 * 12 * 3601 * 3601 * 64 * 12  # QK^T and PV of 12 layers
    assert fused[1] == pytest.approx(flops / (989.4e12 * 0.415) * 1e3, rel=1e-3)  # band 33-50 % at head dim 64


# ---- micro-benchmark -------------------------------------------------------------------------------


def test_microbenchmark_states_its_kernels_efficiency_without_a_time_claim(analyzed) -> None:
    """A 1,053 ms harness with 0.25 ms of layer norms: the norm's efficiency is stated (low confidence,
    no time estimate) instead of being dropped under the 0.5 %-of-E2E floor."""
    done, _ = analyzed
    bench = done["microbench_norm_mi300x"]
    assert bench.quality["gpu_busy_share"] == "warn"
    norms = [f for f in bench.findings if f["agent"] == "norm"]
    assert len(norms) == 1 and "aten::layer_norm" in norms[0]["title"]
    assert norms[0]["confidence"] == "low" and norms[0]["impact_score"] is None
    assert "% of the memory-bound roofline" in norms[0]["insight"]
    assert "no time claim" in bench.markdown.splitlines()[2]


def test_a_workload_keeps_the_time_of_its_norm_findings(analyzed) -> None:
    """The twin that is a workload (GPU busy): its norm findings carry time estimates."""
    done, _ = analyzed
    norms = [f for f in done["norms_mi300x"].findings if f["agent"] == "norm"]
    assert norms and all(f["impact_score"] and f["confidence"] != "low" for f in norms)
    assert done["norms_mi300x"].quality["gpu_busy_share"] == "pass"


def test_generator_is_beside_its_traces() -> None:
    assert all((TRACES / f"{name}.json.gz").exists() for name in NAMES)
    assert Path(TRACES / "make_traces.py").exists()


def test_modelled_paged_attention_is_not_called_unmodelled(analyzed) -> None:
    """vLLM attention in mixed steps: the op with a perf model (its roofline printed) gets fused-attention
    advice, not "no perf model covers it ... get the shapes first"; the op without one still does."""
    done, _ = analyzed
    findings = {f["title"].split(" ")[0]: f for f in done["vllm_mixed_attention_mi300x"].findings if f["agent"] == "sdpa"}
    modelled, unmodelled = findings["vllm::unified_attention_with_output"], findings["vllm::unified_attention"]
    assert "% of the compute-bound roofline" in modelled["insight"]
    assert "no perf model covers it" not in modelled["insight"] and "Get the shapes first" not in modelled["action"]
    assert "mask" not in modelled["action"]  # a paged op's fourth input is its output, not a mask
    assert "no perf model covers it" in unmodelled["insight"] and "Get the shapes first" in unmodelled["action"]
