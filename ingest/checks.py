"""Quality checks that only ingest can see (the parse itself, events it had to drop, values it
had to repair so the JSON decodes, secrets it masked in the metadata).

The checks that follow from the tables (GPU events present, linked share, graph replay, ...)
are dbt models; both land in the `trace_quality` mart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from tracelake.ingest.limits import DROPPED_EVENTS_MAX, MAX_HOST_OP_NESTING, MAX_HOST_TREE_DEPTH, MAX_LABEL_CHARS
from tracelake.ingest.metadata import clip_label

# The count of clipped labels travels with the repaired values (by reason) and gets a row of its own.
CLIPPED_LABELS = "clipped_labels"
# The masked_secrets check names the keys it masked (never their values), this many, then "and N more":
# a trace's environment holds a handful of credentials (HF_TOKEN, GITHUB_TOKEN, ...); a page of keys is noise.
MASKED_KEYS_NAMED = 5

CHECK_SCHEMA = pa.schema(
    [
        ("check_name", pa.string()),
        ("value", pa.float64()),
        ("threshold", pa.float64()),
        ("verdict", pa.string()),
        ("detail", pa.string()),
    ]
)


def _by_reason(counts: Counter[str]) -> str:
    return ", ".join(f"{reason}={count}" for reason, count in sorted(counts.items()))


def _counted(name: str, count: int, verdict: str, detail: str, detail_when_none: str) -> dict[str, object]:
    """A check that passes at a count of zero and has `verdict` otherwise."""
    return {"check_name": name, "value": float(count), "threshold": 0.0, "verdict": verdict if count else "pass",
            "detail": detail if count else detail_when_none}


def _named_keys(key_paths: Sequence[str]) -> str:
    """The metadata keys whose values were masked (each once, clipped), never the values."""
    keys = [clip_label(key) for key in dict.fromkeys(key_paths)]
    more = len(keys) - MASKED_KEYS_NAMED
    return ", ".join(keys[:MASKED_KEYS_NAMED]) + (f" and {more} more keys" if more > 0 else "")


@dataclass(frozen=True)
class DeviceWorkCounts:
    """How the decode read the trace's device work: GPU events it reads, events that look like device
    work in a category it does not read (by spelling), B/E duration events paired and left unmatched."""

    gpu_events: int = 0
    unrecognized: Counter[str] = field(default_factory=Counter)
    begin_end_paired: int = 0
    begin_end_unmatched: int = 0


def _device_work_checks(counts: DeviceWorkCounts) -> list[dict[str, object]]:
    unrecognized = sum(counts.unrecognized.values())
    spellings = ", ".join(f"{category!r} ({count})" for category, count in counts.unrecognized.most_common())
    # with no GPU event read, the whole device side of the trace is missing from the analysis
    verdict = "warn" if counts.gpu_events else "fail"
    pairs = counts.begin_end_paired
    return [
        _counted("unrecognized_device_events", unrecognized, verdict,
                 f"{unrecognized} events look like device work but are in no category TraceLake reads: {spellings}; "
                 + (f"they are left out of the GPU timeline, which covers the {counts.gpu_events} GPU events it reads"
                    if counts.gpu_events else "no GPU event is read, so the trace has no GPU timeline"),
                 "every event that looks like device work is read"),
        {"check_name": "begin_end_events", "value": float(pairs), "threshold": 0.0,
         "verdict": "warn" if counts.begin_end_unmatched else ("info" if pairs else "pass"),
         "detail": (f"{pairs} B/E event pairs read as complete events (matched per thread)"
                    + (f"; {counts.begin_end_unmatched} B or E events match no partner and are not analyzed"
                       if counts.begin_end_unmatched else "")) if pairs or counts.begin_end_unmatched
         else "no B/E duration events"},
    ]


def ingest_checks(
    event_count: int, dropped: Counter[str], phases: Counter[str], repaired: Counter[str] | None = None,
    masked_keys: Sequence[str] = (), device_work: DeviceWorkCounts | None = None, too_deep_events: int = 0,
) -> pa.Table:
    """`dropped`: events left out, by reason; `repaired`: values changed or nulled so the trace
    decodes and fits its columns (invalid UTF-8, NaN literals, too deep nesting, a bool rank, a number
    written as a string, ...); `device_work`: how the GPU side was read."""
    dropped_total = sum(dropped.values())
    repaired = Counter(repaired or ())
    clipped_labels = repaired.pop(CLIPPED_LABELS, 0)
    repaired_total = sum(repaired.values())
    known_phases = {"X", "i", "I", "s", "f", "t", "M", "B", "E", "C", "b", "e", "n"}
    unknown = {ph: c for ph, c in phases.items() if ph not in known_phases}
    rows = [
        {
            "check_name": "parses",
            "value": float(event_count),
            "threshold": 1.0,
            "verdict": "pass",
            "detail": f"file parsed; {event_count} usable events with a 'traceEvents' list",
        },
        {
            "check_name": "dropped_events",
            "value": float(dropped_total),
            "threshold": float(DROPPED_EVENTS_MAX),
            "verdict": "warn" if dropped_total > DROPPED_EVENTS_MAX else "pass",
            "detail": (
                f"dropped {dropped_total} malformed or impossible events ({_by_reason(dropped)})"
                if dropped_total
                else "no malformed events"
            ),
        },
        _counted("unknown_event_phases", sum(unknown.values()), "info",
                 "kept but not analyzed: " + ", ".join(f"ph={k}: {v}" for k, v in sorted(unknown.items())),
                 "all event phases known"),
        _counted("repaired_values", repaired_total, "warn",
                 f"{repaired_total} values could not be stored as written and were replaced or nulled "
                 f"({_by_reason(repaired)})", "every value stored as written"),
        _counted("masked_secrets", len(masked_keys), "info",
                 f"{len(masked_keys)} secret-looking metadata values (tokens, keys, passwords) stored as ***, "
                 f"under {_named_keys(masked_keys)}", "no secret-looking metadata values"),
        _counted(CLIPPED_LABELS, clipped_labels, "warn",
                 f"{clipped_labels} process, thread or nn.Module names longer than {MAX_LABEL_CHARS} characters "
                 f"clipped to {MAX_LABEL_CHARS} (each is copied onto every op row of its thread or module)",
                 f"every process, thread and nn.Module name within {MAX_LABEL_CHARS} characters"),
        _counted("host_tree_depth", too_deep_events, "warn",
                 f"{too_deep_events} host events nested deeper than {MAX_HOST_OP_NESTING} cpu ops or nn.Module frames "
                 f"(or {MAX_HOST_TREE_DEPTH} events) are kept in events but left out of the call tree "
                 "(no parent, module chain or launcher)", "every host event within the nesting limits"),
    ]
    rows += _device_work_checks(device_work or DeviceWorkCounts())
    return pa.Table.from_pylist(rows, schema=CHECK_SCHEMA)
