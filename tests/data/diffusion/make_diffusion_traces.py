"""Write the synthetic diffusion-pipeline traces of tests/data/diffusion/ (and their twins).

Each is a torch.profiler-shaped Chrome trace (gzip JSON): `nn.Module: <Class>_<n>` python frames
(with_modules), python stack frames naming the package that runs them, `cpu_op` events with input
dims, `cudaLaunchKernel` runtime events, kernels on one stream with correlation ids and ac2g flows,
and deviceProperties of an H100. Kernel times are chosen so the answers are known by construction:

- `sd3_xdit.json.gz`: an xDiT SD3-like request (`execute_diffusion_1_1024x1024`, `xfuser/` frames):
  T5EncoderModel and CLIPTextModelWithProjection (x2) calls with little GPU time, the transformer
  `SD3Transformer2DModel` behind an `xFuserSD3Transformer2DWrapper` called 4 times (24 heads x 64,
  most of the GPU time), and the VAE `Decoder` (convolutions, group norms through
  `aiter::_groupnorm_run`);
- `sd3_xdit_launch_bound.json.gz`: the same with every kernel 100 x shorter, so the host's launches
  leave the GPU idle (the GPU-graph advice, which must name no vLLM / SGLang switch);
- `flux_compiled.json.gz`: a diffusers FLUX-like request whose transformer `FluxTransformer2DModel`
  runs behind torch.compile's `OptimizedModule` (a `Torch-Compiled Region`, no block frames), 4 calls;
- `t5_encoder.json.gz` / `t5_encoder_decoder.json.gz`: a T5 encoder alone (no diffusion, no engine)
  and a T5 with its decoder (cross-attention);
- `vit_patch_conv.json.gz` / `hybrid_conv_stem.json.gz`: a ViT-style encoder whose only convolution
  is the patch embedding, and a hybrid whose convolution stem has three different convolutions.

Run from the repository root: python tests/data/diffusion/make_diffusion_traces.py
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PID, TID, STREAM = 4242, 4242, 7
BF16 = "c10::BFloat16"
DEVICE = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9,
          "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
          "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132,
          "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
GEMM_KERNEL = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
FLASH_KERNEL = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 64, 4, cutlass::bfloat16_t> >, false, false, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"
LAYERNORM_KERNEL = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
GELU_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
CONV_KERNEL = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn"
GROUPNORM_KERNEL = "_ZN5aiter18groupnorm_fwd_kernelI6__halfEEvPKT_S3_S3_PS1_iiif"
TRITON_KERNEL = "triton_poi_fused_add_mul_native_layer_norm_0"


class TraceBuilder:
    """Host frames, ops and launches on one thread; kernels queued on one stream after their launch."""

    def __init__(self, kernel_scale: float = 1.0) -> None:
        self.kernel_scale = kernel_scale  # every kernel's GPU time is multiplied by it
        self.events: list[dict[str, Any]] = []
        self.host_us = 1_000_000.0
        self.gpu_us = self.host_us
        self.next_id = 1
        self.python_stack: list[int] = [0]
        self.instances: dict[str, int] = {}

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    @contextmanager
    def frame(self, name: str, category: str = "python_function", args: dict[str, Any] | None = None) -> Iterator[None]:
        start, python_id = self.host_us, self._id()
        parent = self.python_stack[-1]
        self.python_stack.append(python_id)
        self.host_us += 2.0
        yield
        self.host_us += 2.0
        self.python_stack.pop()
        args = {**(args or {}), **({"Python parent id": parent, "Python id": python_id, "Python module id": 0}
                                   if category == "python_function" else {"External id": python_id})}
        self.events.append({"ph": "X", "cat": category, "name": name, "pid": PID, "tid": TID, "ts": start,
                            "dur": self.host_us - start, "args": args})

    @contextmanager
    def module(self, module_class: str) -> Iterator[None]:
        index = self.instances.get(module_class, 0)
        self.instances[module_class] = index + 1
        with self.frame(f"nn.Module: {module_class}_{index}"):
            yield

    @contextmanager
    def same_objects(self, start: dict[str, int]) -> Iterator[None]:
        """A repeated call of the same module objects: their instance numbers restart at `start`."""
        self.instances = dict(start)
        yield

    def op(self, name: str, dims: list[list[int]], kernels: list[tuple[str, float]],
           concrete: list[str] | None = None) -> None:
        """A cpu_op launching `kernels` (name, GPU µs) one after the other."""
        start, external_id = self.host_us, self._id()
        self.host_us += 3.0
        for kernel, dur_us in kernels:
            correlation = self._id()
            launch_ts = self.host_us
            self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": PID, "tid": TID,
                                "ts": launch_ts, "dur": 4.0,
                                "args": {"External id": external_id, "cbid": 211, "correlation": correlation}})
            self.host_us += 5.0
            kernel_ts = max(self.gpu_us, launch_ts + 4.0) + 1.0
            dur_us = round(dur_us * self.kernel_scale, 3)
            self.events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": STREAM, "ts": kernel_ts,
                                "dur": dur_us, "args": {"External id": external_id, "queued": 0, "device": 0,
                                                        "context": 1, "stream": STREAM, "correlation": correlation,
                                                        "grid": [132, 1, 1], "block": [128, 1, 1]}})
            self.events.append({"ph": "s", "id": correlation, "pid": PID, "tid": TID, "ts": launch_ts,
                                "cat": "ac2g", "name": "ac2g"})
            self.events.append({"ph": "f", "id": correlation, "pid": 0, "tid": STREAM, "ts": kernel_ts,
                                "cat": "ac2g", "name": "ac2g", "bp": "e"})
            self.gpu_us = kernel_ts + dur_us
        self.host_us += 2.0
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": PID, "tid": TID, "ts": start,
                            "dur": self.host_us - start,
                            "args": {"External id": external_id, "Record function id": 0,
                                     "Input Dims": dims, "Input type": [BF16 if d else "" for d in dims],
                                     "Concrete Inputs": concrete or ["" for _ in dims]}})

    def linear(self, tokens: int, k: int, n: int, gemm_us: float) -> None:
        with self.module("Linear"):
            self.op("aten::linear", [[1, tokens, k], [n, k], [n]], [(GEMM_KERNEL, gemm_us)])

    def sdpa(self, heads: int, tokens: int, head_dim: int, attn_us: float) -> None:
        q = [1, heads, tokens, head_dim]
        dims = [q, q, q, [], [], [], [], []]
        with self.frame("aten::scaled_dot_product_attention", "cpu_op",
                        {"Input Dims": dims, "Input type": [BF16, BF16, BF16, "", "Scalar", "Scalar", "", "Scalar"],
                         "Concrete Inputs": ["", "", "", "", "0.", "False", "", "False"]}):
            self.op("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], [(FLASH_KERNEL, attn_us)],
                    ["", "", "", "0.", "False", "False", ""])

    def layer_norm(self, tokens: int, width: int, us: float, module_class: str = "LayerNorm") -> None:
        with self.module(module_class):
            self.op("aten::layer_norm", [[1, tokens, width], [], [width], [width], [], []], [(LAYERNORM_KERNEL, us)])

    def conv(self, c_in: int, c_out: int, size: int, kernel: int, us: float, stride: int = 1) -> None:
        with self.module("Conv2d"):
            self.op("aten::convolution", [[1, c_in, size, size], [c_out, c_in, kernel, kernel], [c_out],
                                          [], [], [], [], [], []], [(CONV_KERNEL, us)],
                    ["", "", "", f"[{stride}, {stride}]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"])

    def write(self, path: Path) -> None:
        trace = {"schemaVersion": 1, "deviceProperties": [DEVICE], "with_modules": 1, "with_stack": 1,
                 "record_shapes": 1, "displayTimeUnit": "ms", "traceName": path.name,
                 "traceEvents": [{"name": "process_name", "ph": "M", "ts": 0, "pid": PID, "tid": 0,
                                  "args": {"name": "python3"}}] + sorted(self.events, key=lambda e: e["ts"])}
        path.write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))


def transformer_layer(b: TraceBuilder, layer_class: str, tokens: int, width: int, heads: int, scale: float) -> None:
    """One attention + MLP block: QKV, fused attention, output projection, MLP."""
    head_dim = width // heads
    with b.module(layer_class):
        b.layer_norm(tokens, width, 20 * scale)
        with b.module("Attention"):
            b.linear(tokens, width, 3 * width, 120 * scale)
            b.sdpa(heads, tokens, head_dim, 200 * scale)
            b.linear(tokens, width, width, 40 * scale)
        b.layer_norm(tokens, width, 20 * scale)
        with b.module("FeedForward"):
            b.linear(tokens, width, 4 * width, 160 * scale)
            with b.module("GELU"):
                b.op("aten::gelu", [[1, tokens, 4 * width]], [(GELU_KERNEL, 30 * scale)])
            b.linear(tokens, 4 * width, width, 160 * scale)


def t5_encoder(b: TraceBuilder, layers: int = 2, tokens: int = 256) -> None:
    with b.module("T5EncoderModel"), b.module("T5Stack"):
        for _ in range(layers):
            with b.module("T5Block"), b.module("T5LayerSelfAttention"):
                b.layer_norm(tokens, 4096, 10, "T5LayerNorm")
                with b.module("T5Attention"):
                    b.linear(tokens, 4096, 4096, 40)
                    b.sdpa(64, tokens, 64, 30)
                with b.module("T5LayerFF"):
                    b.linear(tokens, 4096, 10240, 60)
                    b.linear(tokens, 10240, 4096, 60)


def clip_text(b: TraceBuilder, layers: int = 2, tokens: int = 77) -> None:
    with b.module("CLIPTextModelWithProjection"), b.module("CLIPTextTransformer"), b.module("CLIPEncoder"):
        for _ in range(layers):
            transformer_layer(b, "CLIPEncoderLayer", tokens, 768, 12, 0.1)


def vae_decoder(b: TraceBuilder) -> None:
    """diffusers' AutoencoderKL.decode is no forward: its post-quant conv and `Decoder` are the roots."""
    b.conv(16, 16, 128, 1, 20)
    with b.module("Decoder"):
        b.conv(16, 512, 128, 3, 300)
        for _ in range(2):
            with b.module("UpDecoderBlock2D"), b.module("ResnetBlock2D"):
                with b.module("GroupNorm"):
                    b.op("aiter::_groupnorm_run", [[1, 512, 128, 128], [512], [512]], [(GROUPNORM_KERNEL, 150)])
                b.conv(512, 512, 128, 3, 900)


def sd3_xdit(path: Path, kernel_scale: float = 1.0) -> None:
    b = TraceBuilder(kernel_scale)
    with (b.frame("execute_diffusion_1_1024x1024", "user_annotation"),
          b.frame("xfuser/model_executor/pipelines/pipeline_stable_diffusion_3.py(245): __call__"),
          b.frame("diffusers/pipelines/stable_diffusion_3/pipeline_stable_diffusion_3.py(780): __call__")):
        t5_encoder(b)
        clip_text(b)
        clip_text(b)
        start = dict(b.instances)
        for _ in range(4):  # denoising steps: one transformer call each, of the same module objects
            with b.same_objects(start), b.module("xFuserSD3Transformer2DWrapper"), b.module("SD3Transformer2DModel"):
                with b.module("PatchEmbed"):
                    b.conv(16, 1536, 128, 2, 80, stride=2)
                for _ in range(3):
                    transformer_layer(b, "JointTransformerBlock", 4096, 1536, 24, 4.0)
        vae_decoder(b)
    b.write(path)


def flux_compiled(path: Path) -> None:
    b = TraceBuilder()
    with b.frame("diffusers/pipelines/flux/pipeline_flux.py(650): __call__"):
        t5_encoder(b)
        clip_text(b)
        start = dict(b.instances)
        for _ in range(4):
            with b.same_objects(start), b.module("OptimizedModule"), b.module("FluxTransformer2DModel"), \
                    b.frame("Torch-Compiled Region: 0/0", "cpu_op"):
                for _ in range(3):
                    b.op("aten::mm", [[4096, 3072], [3072, 9216]], [(GEMM_KERNEL, 600)])
                    b.op("aten::_scaled_dot_product_flash_attention", [[1, 24, 4096, 128]] * 3,
                         [(FLASH_KERNEL, 900)])
                    b.op("triton_poi_fused_add_mul_native_layer_norm_0", [[4096, 3072]], [(TRITON_KERNEL, 150)])
        vae_decoder(b)
    b.write(path)


def t5_traces(encoder_path: Path, encoder_decoder_path: Path) -> None:
    b = TraceBuilder()
    with b.frame("transformers/models/t5/modeling_t5.py(1900): forward"):
        t5_encoder(b, layers=3)
    b.write(encoder_path)
    b = TraceBuilder()
    with b.module("T5ForConditionalGeneration"):
        with b.module("T5Stack"):
            for _ in range(3):
                with b.module("T5Block"), b.module("T5LayerSelfAttention"), b.module("T5Attention"):
                    b.linear(128, 512, 512, 20)
                    b.sdpa(8, 128, 64, 20)
        with b.module("T5Stack"):
            for _ in range(3):
                with b.module("T5Block"):
                    with b.module("T5LayerSelfAttention"), b.module("T5Attention"):
                        b.linear(16, 512, 512, 10)
                        b.sdpa(8, 16, 64, 10)
                    with b.module("T5LayerCrossAttention"), b.module("T5Attention"):
                        b.linear(16, 512, 512, 10)
                        b.sdpa(8, 16, 64, 10)
    b.write(encoder_decoder_path)


def vit_traces(vit_path: Path, hybrid_path: Path) -> None:
    b = TraceBuilder()
    with b.module("Dinov2Model"):
        with b.module("Dinov2Embeddings"), b.module("Dinov2PatchEmbeddings"):
            b.conv(3, 768, 224, 14, 40, stride=14)
        with b.module("Dinov2Encoder"):
            for _ in range(3):
                transformer_layer(b, "Dinov2Layer", 257, 768, 12, 0.5)
    b.write(vit_path)
    b = TraceBuilder()
    with b.module("LevitModel"):
        with b.module("LevitPatchEmbeddings"):
            b.conv(3, 32, 224, 3, 30, stride=2)
            b.conv(32, 64, 112, 3, 30, stride=2)
            b.conv(64, 128, 56, 3, 30, stride=2)
        with b.module("LevitEncoder"):
            for _ in range(3):
                transformer_layer(b, "LevitLayer", 196, 384, 6, 0.5)
    b.write(hybrid_path)


def main() -> None:
    sd3_xdit(HERE / "sd3_xdit.json.gz")
    sd3_xdit(HERE / "sd3_xdit_launch_bound.json.gz", kernel_scale=0.01)
    flux_compiled(HERE / "flux_compiled.json.gz")
    t5_traces(HERE / "t5_encoder.json.gz", HERE / "t5_encoder_decoder.json.gz")
    vit_traces(HERE / "vit_patch_conv.json.gz", HERE / "hybrid_conv_stem.json.gz")


if __name__ == "__main__":
    main()
