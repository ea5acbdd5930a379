"""Write the two synthetic MI300X decode traces of tests/data/fused_ops (issue 26, "advice only where it fits"):

- fused_ops.json.gz: a decode step (`step[DECODE bs=32]`) of 24 layers whose ops are already the
  fused kernels: `aiter::add_rmsnorm` and `aiter::rmsnorm2d_fwd_with_add` (residual add + RMSNorm),
  `sgl_kernel::silu_and_mul` (gated activation), `sgl_kernel::rotary_embedding` on Q and K together,
  and M=32 projection GEMMs (`aten::mm`, BF16 weights);
- unfused_ops.json.gz, its twin without those facts: a separate `aten::add` + `aiter::rmsnorm`,
  `aten::silu` + `aten::mul`, the rotary op once on Q and once on K, and no serving step (so the
  GEMMs' M, 1 here like a diffusion modulation GEMM, is no token batch);
- fused_ops_tuned.json.gz: fused_ops with GEMMs 0.6x as long (a tuned GEMM library): the same op
  signatures ran faster on the same GPU in another trace, the "best observed" evidence.

Every small kernel runs 5-9 us (the launch / latency floor), the GEMMs 20-60 us, back to back.
Run: python tests/data/fused_ops/make_fused_ops_traces.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
LAYERS = 24
TOKENS = 32
HIDDEN, KV, INTER, POSITIONS = 4096, 1024, 12288, 41216
PID, TID, GPU_PID, STREAM = 100, 100, 0, 7
DEVICE = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9,
          "computeMinor": 4, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 131072,
          "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 304, "maxSharedMemoryPerMultiProcessor": 65536}
GEMM_KERNEL = "Cijk_Alik_Bljk_BBS_BH_MT64x64x64_MI16x16x1_SN_1LDSB0_GRVWA8"
ADD_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >"
MUL_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >"
SILU_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#5}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >"
NORM_KERNEL = "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb1ELb0ELi1EEEvPT0_S2_PKT_S5_S5_PKfPfiiif"
ACT_KERNEL = "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16XadL_ZNS0_4siluIS2_EET_RKS4_EELb1EEEvPS4_PS5_i"
ROPE_KERNEL = "void rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)"


class Timeline:
    """Ops launched one after the other on one thread, their kernels back to back on one stream."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.host_us = 1_000.0
        self.gpu_us = 1_050.0
        self.ident = 1
        self.gemm_speed = 1.0  # GEMM kernel time factor (fused_ops_tuned: 0.6)

    def op(self, name: str, dims: list[Any], types: list[str], kernel: str, kernel_us: float) -> None:
        ident, self.ident = self.ident, self.ident + 1
        strides = [[] if not d else [*[0] * (len(d) - 1), 1] for d in dims]
        args = {"External id": ident, "Input Dims": dims, "Input type": types, "Input Strides": strides,
                "Concrete Inputs": ["" for _ in dims], "Record function id": 0}
        self.events += [
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": self.host_us, "dur": 8.0,
             "args": args},
            {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": PID, "tid": TID,
             "ts": self.host_us + 3.0, "dur": 4.0, "args": {"External id": ident, "correlation": ident}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": ident, "pid": PID, "tid": TID, "ts": self.host_us + 3.0},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": ident, "pid": GPU_PID, "tid": STREAM,
             "ts": self.gpu_us, "bp": "e"},
            {"ph": "X", "cat": "kernel", "name": kernel, "pid": GPU_PID, "tid": STREAM, "ts": self.gpu_us,
             "dur": kernel_us, "args": {"External id": ident, "correlation": ident, "device": 0, "stream": STREAM,
                                        "grid": [TOKENS, 1, 1], "block": [256, 1, 1]}},
        ]
        self.host_us += 10.0
        self.gpu_us = max(self.gpu_us + kernel_us + 1.0, self.host_us + 2.0)


BF16 = "c10::BFloat16"


def gemm(t: Timeline, m: int, k: int, n: int, us: float) -> None:
    t.op("aten::mm", [[m, k], [k, n]], [BF16, BF16], GEMM_KERNEL, us * t.gemm_speed)


def fused_layer(t: Timeline, layer: int) -> None:
    norm = "aiter::add_rmsnorm" if layer % 2 else "aiter::rmsnorm2d_fwd_with_add"
    t.op(norm, [[TOKENS, HIDDEN]] * 4 + [[HIDDEN], []], [BF16] * 5 + ["Scalar"], NORM_KERNEL, 5.0)
    gemm(t, TOKENS, HIDDEN, HIDDEN + 2 * KV, 24.0)
    t.op("sgl_kernel::rotary_embedding", [[TOKENS], [TOKENS, HIDDEN], [TOKENS, KV], [], [POSITIONS, 128], []],
         ["long int", BF16, BF16, "Scalar", BF16, "Scalar"], ROPE_KERNEL, 5.5)
    gemm(t, TOKENS, HIDDEN, HIDDEN, 20.0)
    t.op(norm, [[TOKENS, HIDDEN]] * 4 + [[HIDDEN], []], [BF16] * 5 + ["Scalar"], NORM_KERNEL, 5.0)
    gemm(t, TOKENS, HIDDEN, 2 * INTER, 80.0)
    t.op("sgl_kernel::silu_and_mul", [[TOKENS, INTER], [TOKENS, 2 * INTER]], [BF16, BF16], ACT_KERNEL, 9.0)
    gemm(t, TOKENS, INTER, HIDDEN, 40.0)


def unfused_layer(t: Timeline) -> None:
    for _ in range(2):
        t.op("aten::add", [[TOKENS, HIDDEN], [TOKENS, HIDDEN], []], [BF16, BF16, "Scalar"], ADD_KERNEL, 5.0)
        t.op("aiter::rmsnorm", [[TOKENS, HIDDEN], [TOKENS, HIDDEN], [HIDDEN], []], [BF16, BF16, BF16, "Scalar"],
             NORM_KERNEL, 5.0)
        gemm(t, 1, HIDDEN, 6 * HIDDEN, 60.0)
    for width in (HIDDEN, KV):  # the rotary op once on Q, once on K
        t.op("sgl_kernel::rotary_embedding", [[TOKENS], [TOKENS, width], [], [], [POSITIONS, 128], []],
             ["long int", BF16, "", "Scalar", BF16, "Scalar"], ROPE_KERNEL, 5.5)
    t.op("aten::silu", [[TOKENS, INTER]], [BF16], SILU_KERNEL, 6.0)
    t.op("aten::mul", [[TOKENS, INTER], [TOKENS, INTER]], [BF16, BF16], MUL_KERNEL, 6.0)


def write(name: str, fused: bool, gemm_speed: float = 1.0) -> Path:
    t = Timeline()
    t.gemm_speed = gemm_speed
    for layer in range(LAYERS):
        fused_layer(t, layer) if fused else unfused_layer(t)
    events = t.events
    if fused:  # the serving engine's step annotation: a decode step of TOKENS requests
        events.insert(0, {"ph": "X", "cat": "user_annotation", "name": f"step[DECODE bs={TOKENS}]", "pid": PID,
                          "tid": TID, "ts": 990.0, "dur": t.gpu_us - 990.0 + 5.0,
                          "args": {"External id": 0, "Record function id": 0}})
    trace = {"schemaVersion": 1, "deviceProperties": [DEVICE], "record_shapes": 1, "displayTimeUnit": "ms",
             "baseTimeNanoseconds": 1_775_078_550_000_000_000, "traceName": name, "traceEvents": events}
    path = HERE / name
    with gzip.open(path, "wt") as handle:
        json.dump(trace, handle)
    return path


if __name__ == "__main__":
    print(write("fused_ops.json.gz", fused=True))
    print(write("unfused_ops.json.gz", fused=False))
    print(write("fused_ops_tuned.json.gz", fused=True, gemm_speed=0.6))
