"""Write tests/data/compiled_region/compiled_region_launches.json.gz from the real torch.compile trace
(tests/data/traces/torch_compile_triton/trace.json.gz, also ../shared/traces/torch_compile_triton):
every host op inside its `Torch-Compiled Region` (the `## Call CompiledFxGraph` annotation, the
`aten::mm`, `triton_*` and flash-attention ops) removed, so that the region itself is the innermost
host op of all its launches, as in compiled diffusion transformers (FLUX behind `OptimizedModule`)
whose traces record no op between the region and its kernels. The region then launches 7 GEMM
kernels, 4 Triton kernels and one attention kernel (`attn_fwd`) directly; the kernels, their
runtime launches and the flows are untouched. The real trace is the twin whose region launches
nothing itself. Run: python tests/data/compiled_region/make_compiled_region_trace.py
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = HERE.parent / "traces" / "torch_compile_triton" / "trace.json.gz"
TARGET = HERE / "compiled_region_launches.json.gz"
REGION = "Torch-Compiled Region"
HOST_CATEGORIES = ("cpu_op", "user_annotation", "python_function")


def main() -> None:
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = trace["traceEvents"]
    region = next(e for e in events if e.get("name", "").startswith(REGION))
    start, end = region["ts"], region["ts"] + region["dur"]

    def inside_region(event: dict) -> bool:
        return (event is not region and event.get("cat") in HOST_CATEGORIES and event.get("tid") == region["tid"]
                and start <= event["ts"] and event["ts"] + event.get("dur", 0) <= end)

    trace["traceEvents"] = [e for e in events if not inside_region(e)]
    TARGET.write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))


if __name__ == "__main__":
    main()
