"""Synthetic variants of a real trace: "later runs" for dashboard tests and the dashboard screenshot,
a copy whose names are markup for the escaping tests, and copies that link their GPU work to its
launches differently (launch flows removed or renamed, GPU correlations removed, legacy categories).

`write_slower_run(source, target, pattern, factor)` copies a trace with every GPU kernel whose name
matches `pattern` lasting `factor` times as long. Later GPU work on the same stream (kernels,
copies, memsets and the flow arrows that end on them) is pushed back by the time added, so streams
stay free of overlaps, as a really slower run would look. CPU events are untouched. The copy has
new content, hence a new trace id.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})


def _load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def write_slower_run(source: Path, target: Path, pattern: str, factor: float) -> int:
    """Write the variant to target (gzip when it ends in .gz); returns how many kernels changed."""
    trace = _load(source)
    events: list[dict[str, Any]] = trace["traceEvents"]
    matcher = re.compile(pattern)
    gpu = sorted((e for e in events if e.get("cat") in GPU_CATEGORIES and e.get("ph") == "X"),
                 key=lambda e: (e.get("pid"), e.get("tid"), float(e["ts"])))
    shift_by_correlation: dict[Any, float] = {}
    stream, added, changed = None, 0.0, 0
    for event in gpu:
        if (event.get("pid"), event.get("tid")) != stream:
            stream, added = (event.get("pid"), event.get("tid")), 0.0
        event["ts"] = float(event["ts"]) + added
        correlation = event.get("args", {}).get("correlation")
        if correlation is not None:
            shift_by_correlation[correlation] = added
        if event.get("cat") == "kernel" and matcher.search(event.get("name", "")):
            extra = float(event["dur"]) * (factor - 1.0)
            event["dur"] = float(event["dur"]) + extra
            added += extra
            changed += 1
    for event in events:  # flow arrows that end on a moved kernel move with it
        if event.get("cat") == "ac2g" and event.get("ph") == "f" and event.get("id") in shift_by_correlation:
            event["ts"] = float(event["ts"]) + shift_by_correlation[event["id"]]
    payload = json.dumps(trace).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(payload, mtime=0) if target.suffix == ".gz" else payload)
    return changed


# ---- hostile names ---------------------------------------------------------------------------------

LONG_NAME = ("very_long_name<i>|`*" * 520)[:10240]  # a 10 kB name, markup all along
HOSTILE_OPS = {  # cpu op renames in the BERT-small H100 trace: each name ends up in op_perf
    "aten::addmm": "<script>alert(1)</script>",
    "aten::_scaled_dot_product_flash_attention": "a|b\nc | d",
    "aten::_flash_attention_forward": "a|b\nc | d",
    "aten::layer_norm": "<img src=x onerror=alert(1)>",
    "aten::native_layer_norm": "<img src=x onerror=alert(1)>",
    "aten::add": "x`y``z `q` " + LONG_NAME,  # 10 kB, whole in the findings' data tables
    "aten::gelu": "$\\frac{1}{2}$ \\alpha",
    "aten::all": "**bold** __u__ *i* _e_",
    "aten::index_select": "[link](http://x) ![img](http://y)",
    "aten::eq": "{{ 1 }} {% if x %} TODO nan inf None P99 <Model> tracelake-plot-pending",
}
HOSTILE_KERNELS = {  # kernel renames, by the start of the original name (the first one names a synthetic op)
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop": "<script>alert('k')</script>",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add": "k|pipe\nnewline | x",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel": "k`tick``s",
    "void pytorch_flash::flash_fwd_kernel": "<img src=k onerror=alert(2)>",
    "sm90_xmma_gemm_bf16bf16": "$\\sqrt{k}$ **k** [k](http://k) {{ k }}",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl": "long_kernel_" + LONG_NAME,
}
# nn.Module class rename: the repeated layer class, named in the model evidence and the findings
HOSTILE_MODULE = ("BertLayer", "<b onmouseover=alert(3)>|**Out**`</b>Layer")
HOSTILE_DEVICE = "NVIDIA H100 80GB HBM3 <script>dev</script>"
HOSTILE_INPUT_TYPE = "c10::BFloat16<script>t</script>|`t`"  # the first input type of every hostile aten::add


def write_hostile_names(source: Path, target: Path) -> dict[str, int]:
    """Copy a trace with the ops, kernels, module class and device renamed as above (and one op's
    input type); returns how many events of each kind changed."""
    trace = _load(source)
    changed = {"cpu_op": 0, "kernel": 0, "module": 0, "device": 0, "input_type": 0}
    old_module, new_module = HOSTILE_MODULE
    module_frame = re.compile(rf"^nn\.Module: {re.escape(old_module)}(_[0-9]+)?$")
    for event in trace["traceEvents"]:
        name = event.get("name", "")
        if event.get("cat") == "cpu_op" and name in HOSTILE_OPS:
            event["name"] = HOSTILE_OPS[name]
            changed["cpu_op"] += 1
            types = event.get("args", {}).get("Input type")
            if name == "aten::add" and types:
                types[0] = HOSTILE_INPUT_TYPE
                changed["input_type"] += 1
        elif event.get("cat") == "kernel":
            new = next((n for prefix, n in HOSTILE_KERNELS.items() if name.startswith(prefix)), None)
            if new is not None:
                event["name"] = new
                changed["kernel"] += 1
        elif event.get("cat") == "python_function" and (frame := module_frame.match(name)):
            event["name"] = f"nn.Module: {new_module}{frame.group(1) or ''}"
            changed["module"] += 1
    for device in trace.get("deviceProperties", []):
        device["name"] = HOSTILE_DEVICE
        changed["device"] += 1
    payload = json.dumps(trace).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(payload, mtime=0) if target.suffix == ".gz" else payload)
    return changed


# ---- linking variants ------------------------------------------------------------------------------

LAUNCH_FLOW_CATEGORY = "ac2g"
LEGACY_CATEGORIES = {"kernel": "Kernel", "cuda_runtime": "Runtime", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset",
                     "cpu_op": "Operator"}


def _write(trace: dict[str, Any], target: Path) -> None:
    payload = json.dumps(trace).encode()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(gzip.compress(payload, mtime=0) if target.suffix == ".gz" else payload)


def _is_launch_flow(event: dict[str, Any]) -> bool:
    return event.get("cat") == LAUNCH_FLOW_CATEGORY and event.get("ph") in ("s", "f", "t")


def write_without_launch_flows(source: Path, target: Path, drop_gpu_correlations: bool = False) -> int:
    """Copy a trace without its ac2g flow events (a sampled trace's shape); with
    `drop_gpu_correlations`, GPU events lose their `correlation` too, so nothing can link them.
    Returns how many flow events were removed."""
    trace = _load(source)
    events = trace["traceEvents"]
    kept = [e for e in events if not _is_launch_flow(e)]
    if drop_gpu_correlations:
        for event in kept:
            if event.get("cat") in GPU_CATEGORIES:
                event.get("args", {}).pop("correlation", None)
    trace["traceEvents"] = kept
    _write(trace, target)
    return len(events) - len(kept)


def write_with_renamed_launch_flows(source: Path, target: Path, category: str) -> int:
    """Copy a trace with its ac2g flow events' category renamed (e.g. the older `async_cpu_to_gpu`)."""
    trace = _load(source)
    renamed = 0
    for event in trace["traceEvents"]:
        if _is_launch_flow(event):
            event["cat"] = category
            renamed += 1
    _write(trace, target)
    return renamed


def write_legacy_categories(source: Path, target: Path) -> int:
    """Copy a trace with the kernel, runtime, memcpy and memset categories spelled as older profilers
    did (LEGACY_CATEGORIES). Returns how many events changed."""
    trace = _load(source)
    changed = 0
    for event in trace["traceEvents"]:
        legacy = LEGACY_CATEGORIES.get(event.get("cat"))
        if legacy is not None:
            event["cat"] = legacy
            changed += 1
    _write(trace, target)
    return changed


# ---- idle-gap mechanisms ---------------------------------------------------------------------------


def write_with_pause(source: Path, target: Path, at_us: float, pause_us: float, gpu_only: bool = False) -> int:
    """Copy a trace as if everything stopped for `pause_us` at instant `at_us` (trace clock): events
    starting at or after it start that much later, events spanning it last that much longer. With
    `gpu_only`, only the GPU work (and the launch-flow ends on it) is held back: the host launched on
    time and its kernels waited in the queue. Returns how many events moved or stretched."""
    trace = _load(source)
    changed = 0
    for event in trace["traceEvents"]:
        if "ts" not in event:
            continue
        is_gpu = event.get("cat") in GPU_CATEGORIES or (_is_launch_flow(event) and event.get("ph") == "f")
        if gpu_only and not is_gpu:
            continue
        ts = float(event["ts"])
        if ts >= at_us:
            event["ts"] = ts + pause_us
            changed += 1
        elif "dur" in event and ts + float(event["dur"]) > at_us:
            event["dur"] = float(event["dur"]) + pause_us
            changed += 1
    _write(trace, target)
    return changed


# ---- what a trace shows about its model and device ----------------------------------------------------

MODULE_FRAME_PREFIX = "nn.Module: "


def write_model_pipeline(source: Path, target: Path, dropped: tuple[str, ...],
                         components: dict[str, tuple[str, str]]) -> int:
    """Copy a trace with its model's module tree turned into a pipeline of several models: the
    `dropped` module frames (instances, e.g. the model's own outer calls) are removed, and each new
    component frame (`T5EncoderModel_0`) spans from the start of one existing frame to the end of
    another on its thread, so the layers between them become that component's. Returns the
    number of frames added."""
    trace = _load(source)
    events = trace["traceEvents"]
    frames = {e["name"][len(MODULE_FRAME_PREFIX):]: e for e in events
              if e.get("ph") == "X" and str(e.get("name", "")).startswith(MODULE_FRAME_PREFIX)}
    kept = [e for e in events if not (e.get("ph") == "X" and str(e.get("name", "")).startswith(MODULE_FRAME_PREFIX)
                                      and e["name"][len(MODULE_FRAME_PREFIX):] in dropped)]
    for instance, (first, last) in components.items():
        start, end = frames[first], frames[last]
        ts = float(start["ts"])
        kept.append({"ph": "X", "cat": start.get("cat", "python_function"), "name": MODULE_FRAME_PREFIX + instance,
                     "pid": start["pid"], "tid": start["tid"], "ts": ts,
                     "dur": float(end["ts"]) + float(end["dur"]) - ts, "args": {}})
    trace["traceEvents"] = kept
    _write(trace, target)
    return len(components)


def write_with_device_name(source: Path, target: Path, device_name: str) -> int:
    """Copy a trace with every device of its deviceProperties renamed (an unknown GPU)."""
    trace = _load(source)
    devices = trace.get("deviceProperties") or []
    for device in devices:
        device["name"] = device_name
    _write(trace, target)
    return len(devices)


def write_repeated(source: Path, target: Path, copies: int) -> int:
    """The source's timed events `copies` times, each copy after the last (shifted past its span, its
    correlation and flow ids offset so links stay inside a copy): a bigger trace with the same event
    mix. Returns the event count written."""
    trace = _load(source)
    events: list[dict[str, Any]] = trace["traceEvents"]
    timed = [e for e in events if e.get("ph") != "M"]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000
    id_stride = 1 + max([int(e.get("id", 0)) for e in timed if isinstance(e.get("id"), int)]
                        + [int(e.get("args", {}).get("correlation", 0)) for e in timed
                           if isinstance(e.get("args", {}).get("correlation"), int)])
    repeated = [e for e in events if e.get("ph") == "M"]
    for copy in range(copies):
        for event in timed:
            shifted = {**event, "ts": event["ts"] + copy * span}
            if isinstance(event.get("id"), int):
                shifted["id"] = event["id"] + copy * id_stride
            if isinstance(event.get("args", {}).get("correlation"), int):
                shifted["args"] = {**event["args"], "correlation": event["args"]["correlation"] + copy * id_stride}
            repeated.append(shifted)
    trace["traceEvents"] = repeated
    _write(trace, target)
    return len(repeated)
