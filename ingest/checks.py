"""Quality checks that only ingest can see (the parse itself, events it had to drop).

The checks that follow from the tables (GPU events present, linked share, graph replay, ...)
are dbt models; both land in the `trace_quality` mart.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

CHECK_SCHEMA = pa.schema(
    [
        ("check_name", pa.string()),
        ("value", pa.float64()),
        ("threshold", pa.float64()),
        ("verdict", pa.string()),
        ("detail", pa.string()),
    ]
)

# A trace with any malformed event is still analyzed, but the report should say so.
DROPPED_EVENTS_MAX = 0


def ingest_checks(event_count: int, dropped: Counter[str], phases: Counter[str]) -> pa.Table:
    dropped_total = sum(dropped.values())
    reasons = ", ".join(f"{reason}={count}" for reason, count in sorted(dropped.items()))
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
                f"dropped {dropped_total} malformed events ({reasons})"
                if dropped_total
                else "no malformed events"
            ),
        },
        {
            "check_name": "unknown_event_phases",
            "value": float(sum(unknown.values())),
            "threshold": 0.0,
            "verdict": "info" if unknown else "pass",
            "detail": (
                "kept but not analyzed: " + ", ".join(f"ph={k}: {v}" for k, v in sorted(unknown.items()))
                if unknown
                else "all event phases known"
            ),
        },
    ]
    return pa.Table.from_pylist(rows, schema=CHECK_SCHEMA)
