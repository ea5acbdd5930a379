"""Write tests/data/phases/sglang_prefill_decode.json.gz from the real SGLang decode trace
(../shared/traces/inference/sglang_decode, also tests/data/traces/inference/sglang_decode): five
serving steps, each a copy of the trace's one real step (a hipGraphLaunch replay of 10.45 ms),
re-annotated and shifted so the steps follow each other 1 ms apart:

1. the whole original trace (with its 463 ms window-edge idle gap inside the step annotation),
   re-annotated as a prefill of 15 prompts of 1,024 tokens;
2-4. the step's tail (from 100 us before its graph launch), annotated as the original decode step
   of 32 requests;
5. the tail again, annotated as a mixed step (1 prefill of 1,024 tokens + 3 decode requests).

The GPU work is the decode graph in every step (a replay does not change with the label); the
tests check what the annotations say, not the kernels. Run: python tests/data/phases/make_mixed_trace.py
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent
SOURCE = HERE.parent / "traces" / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz"
TARGET = HERE / "sglang_prefill_decode.json.gz"
ID_ARGS = ("correlation", "External id", "Python id", "Python parent id", "Record function id", "cid")
ID_STRIDE = 10_000_000  # added per copy to every id, so the copies' launches and flows stay apart
STEP_GAP_US = 1000.0
TAIL_LEAD_US = 100.0

PREFILL = ("step[EXTEND bs=15 toks=15360 c_sq=15360 c_sk=15360 c_sqsq=15728640 c_sqsk=15728640]",
           "execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0(sq0sk0sqsq0sqsk0)")
MIXED = ("step[MIXED bs=4 c=1 g=3 c_sq=1024 c_sk=1024 c_sqsq=1048576 c_sqsk=1048576 g_sq=3 g_sk=3072 g_sqsq=3 g_sqsk=3072]",
         "execute_1027_context_1(sq1024sk1024sqsq1048576sqsk1048576)_generation_3(sq3sk3072sqsq3sqsk3072)")


def _copy(events: list[dict], start_us: float, shift_us: float, k: int, names: tuple[str, str] | None) -> list[dict]:
    out = []
    for event in events:
        if event.get("ph") == "M":
            continue
        is_annotation = event.get("cat") == "user_annotation"
        if event["ts"] < start_us and not is_annotation:
            continue
        event = copy.deepcopy(event)
        if is_annotation and event["ts"] < start_us:
            event["dur"] -= start_us - event["ts"]
            event["ts"] = start_us
        if is_annotation and names is not None:
            event["name"] = names[0] if event["name"].startswith("step[") else names[1]
        event["ts"] += shift_us
        if "id" in event:
            event["id"] += k * ID_STRIDE
        args = event.get("args", {})
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] += k * ID_STRIDE
        out.append(event)
    return out


def main() -> None:
    trace = json.loads(gzip.decompress(SOURCE.read_bytes()))
    events = trace["traceEvents"]
    timed = [e for e in events if e.get("ph") == "X"]
    first = min(e["ts"] for e in timed)
    last = max(e["ts"] + e["dur"] for e in timed)
    launch = next(e["ts"] for e in timed if e["name"] == "hipGraphLaunch")
    tail_start = launch - TAIL_LEAD_US
    out = [e for e in events if e.get("ph") == "M"] + _copy(events, first, 0.0, 0, PREFILL)
    end = last
    for k, names in enumerate([None, None, None, MIXED], start=1):
        shift = end + STEP_GAP_US - tail_start
        out += _copy(events, tail_start, shift, k, names)
        end = last + shift
    trace["traceEvents"] = out
    TARGET.write_bytes(gzip.compress(json.dumps(trace).encode(), mtime=0))


if __name__ == "__main__":
    main()
