"""Quality checks that only ingest can see (the parse itself, events it had to drop, values it
had to repair so the JSON decodes, secrets it masked in the metadata).

The checks that follow from the tables (GPU events present, linked share, graph replay, ...)
are dbt models; both land in the `trace_quality` mart.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from tracelake.decoding.limits import MAX_LABEL_CHARS
from tracelake.decoding.limits import DROPPED_EVENTS_MAX, MAX_HOST_OP_NESTING, MAX_HOST_TREE_DEPTH

# The count of clipped labels travels with the repaired values (by reason) and gets a row of its own.
CLIPPED_LABELS = "clipped_labels"

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


def ingest_checks(
    event_count: int, dropped: Counter[str], phases: Counter[str], repaired: Counter[str] | None = None,
    masked_secrets: int = 0, too_deep_events: int = 0,
) -> pa.Table:
    """`dropped`: events left out, by reason; `repaired`: values changed or nulled so the trace
    decodes and fits its columns (invalid UTF-8, NaN literals, too deep nesting, a bool rank, ...)."""
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
        _counted("masked_secrets", masked_secrets, "info",
                 f"{masked_secrets} secret-looking metadata values (tokens, keys, passwords) stored as ***",
                 "no secret-looking metadata values"),
        _counted(CLIPPED_LABELS, clipped_labels, "warn",
                 f"{clipped_labels} process, thread or nn.Module names longer than {MAX_LABEL_CHARS} characters "
                 f"clipped to {MAX_LABEL_CHARS} (each is copied onto every op row of its thread or module)",
                 f"every process, thread and nn.Module name within {MAX_LABEL_CHARS} characters"),
        _counted("host_tree_depth", too_deep_events, "warn",
                 f"{too_deep_events} host events nested deeper than {MAX_HOST_OP_NESTING} cpu ops or nn.Module frames "
                 f"(or {MAX_HOST_TREE_DEPTH} events) are kept in events but left out of the call tree "
                 "(no parent, module chain or launcher)", "every host event within the nesting limits"),
    ]
    return pa.Table.from_pylist(rows, schema=CHECK_SCHEMA)
