"""Write tests/data/data_loading/data_loading.json.gz and its twin host_copy.json.gz: a small
Kineto trace of 6 training-like steps on one H100, each a `ProfilerStep#k` with a GEMM (`aten::mm`,
2 ms on the GPU) and an add (`aten::add`, 0.5 ms), launched in 40 us; the host then spends 5 ms
before the next step's launches, so the GPU idles about 2.5 ms per step with the next kernel
launched late (host-work gaps). In data_loading.json.gz those 5 ms are PyTorch's DataLoader fetch,
`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, whose time is an `aten::copy_` (the
batch copied into pinned memory); in host_copy.json.gz the same `aten::copy_` runs under
`Optimizer.zero_grad#SGD.zero_grad`: the same host work, not data loading.
Run: python tests/data/data_loading/make_data_loading_trace.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PID, TID, STREAM = 4242, 4242, 7
BASE_US = 1_700_000_000_000.0
STEPS = 6
STEP_US = 10_000.0
DEVICE = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9,
          "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536,
          "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
          "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)")
LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
NOT_LOADER = "Optimizer.zero_grad#SGD.zero_grad"


def _x(cat: str, name: str, ts: float, dur: float, args: dict[str, Any], pid: int = PID, tid: int = TID) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": round(ts, 3), "dur": round(dur, 3),
            "args": args}


def _events(host_frame: str) -> list[dict]:
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "ts": BASE_US, "pid": PID, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": BASE_US, "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
        {"name": "thread_name", "ph": "M", "ts": BASE_US, "pid": PID, "tid": TID, "args": {"name": "thread 1 (python3)"}},
        {"name": "process_name", "ph": "M", "ts": BASE_US, "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"name": "process_labels", "ph": "M", "ts": BASE_US, "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    ext = corr = 0
    for k in range(STEPS):
        t0 = BASE_US + k * STEP_US
        ext += 1
        events.append(_x("user_annotation", f"ProfilerStep#{k}", t0, STEP_US - 10.0, {"External id": ext}))
        for offset, op, kernel, gpu_start, gpu_dur, dims in (
                (5.0, "aten::mm", GEMM, 40.0, 2000.0, [[4096, 4096], [4096, 4096]]),
                (20.0, "aten::add", ADD, 2050.0, 500.0, [[4096, 4096], [4096, 4096], []])):
            ext += 1
            corr += 1
            events.append(_x("cpu_op", op, t0 + offset, 12.0, {"External id": ext, "Input Dims": dims,
                                                              "Input type": ["c10::BFloat16"] * 2}))
            events.append(_x("cuda_runtime", "cudaLaunchKernel", t0 + offset + 2.0, 8.0, {"correlation": corr,
                                                                                     "cbid": 211}))
            events.append({"ph": "s", "id": corr, "pid": PID, "tid": TID, "ts": round(t0 + offset + 2.0, 3),
                           "cat": "ac2g", "name": "ac2g"})
            events.append(_x("kernel", kernel, t0 + gpu_start, gpu_dur,
                             {"External id": ext, "device": 0, "stream": STREAM, "correlation": corr,
                              "grid": [132, 1, 1], "block": [128, 1, 1]}, pid=0, tid=STREAM))
            events.append({"ph": "f", "id": corr, "pid": 0, "tid": STREAM, "ts": round(t0 + gpu_start, 3),
                           "cat": "ac2g", "name": "ac2g", "bp": "e"})
        ext += 1
        events.append(_x("cpu_op", host_frame, t0 + 60.0, 5000.0, {"External id": ext}))
        ext += 1
        events.append(_x("cpu_op", "aten::copy_", t0 + 65.0, 4980.0, {"External id": ext,
                                                                      "Input Dims": [[256, 3, 224, 224]] * 2}))
    return events


def main() -> None:
    for name, frame in (("data_loading.json.gz", LOADER), ("host_copy.json.gz", NOT_LOADER)):
        trace = {"schemaVersion": 1, "deviceProperties": [DEVICE], "traceName": name, "displayTimeUnit": "ms",
                 "baseTimeNanoseconds": 1_700_000_000_000_000_000, "traceEvents": _events(frame)}
        (HERE / name).write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))


if __name__ == "__main__":
    main()
