"""Write the synthetic Chrome traces of tests/data/perf_models/ (issue 26, items 5 and 6): features no
real trace we have holds, each trace small and built from scratch with the PyTorch profiler's event
layout (cpu_op with `Input Dims` / `Input type` / `Concrete Inputs`, a runtime launch, the kernel
linked by `correlation` and `External id`, nn.Module python functions):

- owl_attention_{h100,mi300x}: the same OWLv2-like vision encoder (12 layers, 3,601 tokens, 12 heads
  of 64) on a CUDA and a ROCm device, attention unfused (bmm -> mul -> softmax -> bmm), with the
  vendors' own GEMM kernel and runtime names; the ROCm twin's kernels overlap by 0.5 us on the stream
  as roctracer records them;
- owl_attention_long_chain_h100: the H100 twin with six elementwise ops on the scores before the
  softmax, beyond the kernel-fusion window: the attention agent finds the chain;
- sage_attention_mi300x: SageAttention (`sageattention::qk_int8_sv_f8_accum_f32_attn`, int8 Q/K, fp8 V)
  whose kernels are aiter's Triton `sage_quant_kernel` and `sage_fwd`;
- mha_batch_prefill_mi300x: `aiter::mha_batch_prefill` inside a vLLM step annotation (2 prompts of
  1,024 tokens);
- vllm_mixed_attention_mi300x: vLLM attention ops in mixed prefill + decode steps, one with a perf
  model (from the step annotation) and one without;
- norms_mi300x: group norm and instance norm forward, layer-norm / group-norm / RMSNorm backward,
  `aten::_fused_rms_norm`, `aiter::_groupnorm_run`;
- microbench_norm_mi300x: a normalization micro-benchmark: a 1,053 ms harness window holding a
  few 40-60 us layer-norm kernels.

Run: python tests/data/perf_models/make_traces.py
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PID, TID = 100, 100
BF16, FP32 = "c10::BFloat16", "float"


@dataclass
class Vendor:
    device: str
    runtime: str
    gemm_kernel: str
    gpu_pid: int
    stream: int
    overlap_us: float = 0.0  # how much each kernel starts before the previous one ended (roctracer)
    header: dict[str, Any] = field(default_factory=dict)


CUDA = Vendor("NVIDIA H100 80GB HBM3", "cudaLaunchKernel",
              "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
              0, 7, header={"cuda_runtime_version": 12040})
ROCM = Vendor("AMD Instinct MI300X", "hipExtModuleLaunchKernel",
              "Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1",
              2, 0, overlap_us=0.5, header={"roctracer_version": 4, "hip_runtime_version": 60342})
SOFTMAX_KERNEL = ("void (anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, "
                  "(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)")
MUL_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, "
              "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >")
NORM_KERNEL = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"


class Builder:
    """Host ops on one thread, their kernels one after another on one stream."""

    def __init__(self, vendor: Vendor, host_start: float = 1000.0) -> None:
        self.vendor = vendor
        self.events: list[dict[str, Any]] = []
        self.host = host_start
        self.gpu = host_start + 50.0
        self.next_id = 1

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def span(self, cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
        event = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID, "ts": round(ts, 3),
                 "dur": round(dur, 3), "args": args}
        self.events.append(event)
        return event

    def op(self, name: str, dims: list[Any], types: list[str], concrete: list[str] | None = None,
           kernels: tuple[tuple[str, float], ...] = (), host_us: float = 20.0, children: Any = None) -> None:
        """A cpu op with its shapes; its kernels (name, duration) launched from it, or its children's."""
        ext = self._id()
        start = self.host
        op = self.span("cpu_op", name, start, 0.0, **{"External id": ext, "Input Dims": dims, "Input type": types,
                                                       "Concrete Inputs": concrete or [""] * len(dims)})
        self.host += 2.0
        if children is not None:
            children()
        for kernel, dur in kernels:
            self.launch(kernel, dur, ext)
        self.host += host_us
        op["dur"] = round(self.host - start, 3)
        self.host += 2.0

    def launch(self, kernel: str, dur: float, ext: int | None) -> None:
        correlation = self._id()
        self.span("cuda_runtime", self.vendor.runtime, self.host, 4.0,
                  **{"External id": ext or 0, "correlation": correlation, "cbid": 211})
        self.events.append({"ph": "s", "id": correlation, "pid": PID, "tid": TID, "ts": round(self.host, 3),
                            "cat": "ac2g", "name": "ac2g"})
        start = max(self.gpu, self.host + 5.0)
        self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": self.vendor.gpu_pid,
                            "tid": self.vendor.stream, "ts": round(start, 3), "dur": dur,
                            "args": {"External id": ext or 0, "device": self.vendor.gpu_pid,
                                     "stream": self.vendor.stream, "correlation": correlation}})
        self.events.append({"ph": "f", "id": correlation, "pid": self.vendor.gpu_pid, "tid": self.vendor.stream,
                            "ts": round(start, 3), "cat": "ac2g", "name": "ac2g", "bp": "e"})
        self.gpu = start + dur - self.vendor.overlap_us
        self.host += 6.0

    def module(self, name: str, body: Any) -> None:
        start = self.host
        event = self.span("python_function", f"nn.Module: {name}", start, 0.0,
                          **{"Python id": self._id(), "Python module id": 0, "Python parent id": None})
        self.host += 1.0
        body()
        self.host += 1.0
        event["dur"] = round(self.host - start, 3)

    def write(self, path: Path, step_start: float | None = None, step_end: float | None = None) -> None:
        start = 900.0 if step_start is None else step_start
        end = max(self.gpu, self.host) + 20.0 if step_end is None else step_end
        self.span("user_annotation", "ProfilerStep#1", start, end - start, **{"External id": 1})
        trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": self.vendor.device}],
                 "record_shapes": 1, "with_modules": 1, "displayTimeUnit": "ms",
                 "traceName": path.name, "baseTimeNanoseconds": 1_700_000_000_000_000_000, **self.vendor.header,
                 "traceEvents": [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": "python3"}},
                                 *sorted(self.events, key=lambda e: e["ts"])]}
        path.write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))


# ---- OWLv2-like unfused attention ----------------------------------------------------------------

OWL_TOKENS, OWL_HEADS, OWL_HEAD_DIM, OWL_HIDDEN, OWL_LAYERS = 3601, 12, 64, 768, 12


def owl_attention(vendor: Vendor, score_ops: int = 1) -> Builder:
    """`score_ops` elementwise ops on the scores between the first bmm and the softmax (scale, masks,
    position biases, casts): more than the kernel-fusion window's reach leaves the chain to the
    attention agent's own eager-attention finder."""
    b = Builder(vendor)
    n, h, d, w = OWL_TOKENS, OWL_HEADS, OWL_HEAD_DIM, OWL_HIDDEN

    def linear(out_features: int, dur: float) -> None:
        b.op("aten::addmm", [[out_features], [n, w], [w, out_features], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"],
             kernels=((vendor.gemm_kernel, dur),))

    def attention() -> None:
        for _ in range(3):
            linear(w, 40.0)
        b.op("aten::bmm", [[h, n, d], [h, d, n]], [BF16, BF16], kernels=((vendor.gemm_kernel, 60.0),))
        for _ in range(score_ops):
            b.op("aten::mul", [[h, n, n], []], [BF16, "Scalar"], kernels=((MUL_KERNEL, 150.0),))
        b.op("aten::_softmax", [[h, n, n], [], []], [BF16, "Scalar", "Scalar"], ["", "-1", "False"],
             kernels=((SOFTMAX_KERNEL, 250.0),))
        b.op("aten::bmm", [[h, n, n], [h, n, d]], [BF16, BF16], kernels=((vendor.gemm_kernel, 60.0),))
        linear(w, 40.0)

    def encoder() -> None:
        for layer in range(OWL_LAYERS):
            b.module(f"Owlv2EncoderLayer_{layer}", lambda i=layer: b.module(f"Owlv2Attention_{i}", attention))

    b.module("Owlv2VisionTransformer_0", encoder)
    return b


# ---- SageAttention, mha_batch_prefill --------------------------------------------------------------

SAGE_B, SAGE_N, SAGE_H, SAGE_D = 1, 4096, 24, 128


def sage_attention() -> Builder:
    b = Builder(ROCM)
    q = [SAGE_B, SAGE_N, SAGE_H, SAGE_D]  # NHD (tensor_layout 0)

    def block() -> None:
        b.op("sageattention::qk_int8_sv_f8_accum_f32_attn",
             [q, q, q, q, [SAGE_B, SAGE_H, 32], [SAGE_B, SAGE_H, 64], [SAGE_B, SAGE_H, SAGE_D], [], [], [], [], []],
             ["signed char", "signed char", "c10::Float8_e4m3fnuz", BF16, FP32, FP32, FP32,
              "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
             ["", "", "", "", "", "", "", "0", "0", "2", "0.088", "False"],
             kernels=(("sage_quant_kernel", 120.0), ("sage_fwd", 900.0)))

    for i in range(4):
        b.module(f"JointTransformerBlock_{i}", block)
    return b


PREFILL_STEP = "execute_2048_context_2(sq2048sk2048sqsq2097152sqsk2097152)_generation_0(sq0sk0sqsq0sqsk0)"


def mha_batch_prefill() -> Builder:
    b = Builder(ROCM)
    start = b.host
    for _ in range(4):
        b.op("aiter::mha_batch_prefill",
             [[2048, 32, 128], [4096, 16, 8, 128], [4096, 16, 8, 128], [3], [3], [128], [], []],
             [BF16, BF16, BF16, "int", "int", "int", "Scalar", "Scalar"],
             kernels=(("fmha_batch_prefill_d128_bf16_batch_b128x128x32_r2x1x1_psddv_mask", 300.0),))
    b.span("user_annotation", PREFILL_STEP, start - 1.0, b.host - start + 2.0, **{"External id": 0})
    return b


MIXED_STEP = "execute_1027_context_1(sq1024sk1024sqsq1048576sqsk1048576)_generation_3(sq3sk3072sqsq3sqsk3072)"


def vllm_mixed_attention() -> Builder:
    """vLLM attention in mixed steps (1 prefill + 3 decode requests): the phase is neither prefill nor
    decode; `unified_attention_with_output` has a perf model (from the step annotation), the older
    `unified_attention` none."""
    b = Builder(ROCM)
    for _ in range(3):
        start = b.host
        for name in ("vllm::unified_attention_with_output", "vllm::unified_attention"):
            b.op(name, [[1027, 32, 128], [1027, 8, 128], [1027, 8, 128], [1027, 32, 128], []],
                 [BF16, BF16, BF16, BF16, "String"],
                 kernels=(("kernel_unified_attention_2d", 400.0 if name.endswith("output") else 300.0),))
        b.span("user_annotation", MIXED_STEP, start - 1.0, b.host - start + 2.0, **{"External id": 0})
        b.host += 50.0
    return b


# ---- normalization ---------------------------------------------------------------------------------


def norms() -> Builder:
    b = Builder(ROCM)
    x = [8, 512, 64, 64]  # N, C, H, W
    b.op("aten::group_norm", [x, [], [512], [512], [], []], [BF16, "Scalar", BF16, BF16, "Scalar", "Scalar"],
         ["", "32", "", "", "1e-05", "True"],
         children=lambda: b.op("aten::native_group_norm", [x, [512], [512], [], [], [], [], []],
                               [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
                               ["", "", "", "8", "512", "4096", "32", "1e-05"],
                               kernels=(("void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<c10::BFloat16>", 80.0),
                                        ("void at::native::(anonymous namespace)::ComputeFusedParamsCUDAKernel<c10::BFloat16>", 5.0),
                                        ("void at::native::elementwise_kernel<128, 4, GroupNorm1dForward>", 90.0))))
    b.op("aten::instance_norm", [x, [512], [512], [], [], [], [], [], []],
         [BF16, BF16, BF16, "", "", "Scalar", "Scalar", "Scalar", "Scalar"],
         ["", "", "", "", "", "True", "0.1", "1e-05", "True"],
         kernels=(("void at::native::batch_norm_collect_statistics_kernel<c10::BFloat16, float>", 70.0),
                  ("void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float>", 70.0)))
    b.op("aiter::_groupnorm_run", [x, [512], [512], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"],
         ["", "", "", "32", "1e-05"], kernels=(("groupnorm_fwd_kernel_bf16", 60.0),))
    t = [16, 1024, 2048]  # tokens [B, S, C]
    b.op("aten::native_layer_norm_backward", [t, t, [], [16, 1024, 1], [16, 1024, 1], [2048], [2048], []],
         [BF16, BF16, "Scalar", FP32, FP32, BF16, BF16, "Scalar"],
         ["", "", "[2048]", "", "", "", "", "[True, True, True]"],
         kernels=(("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<c10::BFloat16, float>", 200.0),
                  ("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::BFloat16, float>", 60.0)))
    # the edge case: no weight or bias (elementwise_affine=False) and no input gradient asked for
    b.op("aten::native_layer_norm_backward", [t, t, [], [16, 1024, 1], [16, 1024, 1], [], [], []],
         [BF16, BF16, "Scalar", FP32, FP32, "", "", "Scalar"],
         ["", "", "[2048]", "", "", "", "", "[False, True, True]"],
         kernels=(("void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::BFloat16, float>", 60.0),))
    b.op("aten::native_group_norm_backward",
         [x, x, [8, 32], [8, 32], [512], [], [], [], [], []],
         [BF16, BF16, FP32, FP32, BF16, "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"],
         ["", "", "", "", "", "8", "512", "4096", "32", "[True, True, True]"],
         kernels=(("void at::native::(anonymous namespace)::Compute1dBackwardFusedParamsCUDAKernel<c10::BFloat16>", 150.0),))
    b.op("aten::_fused_rms_norm", [t, [], [2048], []], [BF16, "Scalar", BF16, "Scalar"], ["", "[2048]", "", "1e-06"],
         kernels=(("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, true>", 90.0),))
    b.op("aten::_fused_rms_norm_backward", [t, t, [], [16, 1024, 1], [2048], []],
         [BF16, BF16, "Scalar", FP32, BF16, "Scalar"], ["", "", "[2048]", "", "", "[True, True]"],
         kernels=(("void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<c10::BFloat16, float, true>", 180.0),))
    return b


def microbench() -> tuple[Builder, float, float]:
    """A harness: 1,053 ms of profiled window, of which a few small layer-norm kernels run on the GPU."""
    b = Builder(ROCM)
    start = b.host
    x = [4, 1024, 1024]
    for _ in range(5):
        b.op("aten::layer_norm", [x, [], [1024], [1024], [], []], [BF16, "Scalar", BF16, BF16, "Scalar", "Scalar"],
             ["", "[1024]", "", "", "1e-05", "True"],
             children=lambda: b.op("aten::native_layer_norm", [x, [], [1024], [1024], []],
                                   [BF16, "Scalar", BF16, BF16, "Scalar"], ["", "[1024]", "", "", "1e-05"],
                                   kernels=((NORM_KERNEL, 50.0),)))
        b.host += 210_000.0  # the harness between calls: timing, synchronisation, host-side checks
    return b, start - 100.0, start + 1_053_000.0


def main() -> None:
    owl_attention(CUDA).write(HERE / "owl_attention_h100.json.gz")
    owl_attention(ROCM).write(HERE / "owl_attention_mi300x.json.gz")
    owl_attention(CUDA, score_ops=6).write(HERE / "owl_attention_long_chain_h100.json.gz")
    sage_attention().write(HERE / "sage_attention_mi300x.json.gz")
    mha_batch_prefill().write(HERE / "mha_batch_prefill_mi300x.json.gz")
    vllm_mixed_attention().write(HERE / "vllm_mixed_attention_mi300x.json.gz")
    norms().write(HERE / "norms_mi300x.json.gz")
    bench, start, end = microbench()
    bench.write(HERE / "microbench_norm_mi300x.json.gz", start, end)


if __name__ == "__main__":
    main()
