"""Synthetic "later runs" of a real trace, for dashboard tests and the dashboard screenshot.

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
