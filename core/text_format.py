"""Plain text for people: one line, clipped, numbers with their usual decimals.

The one home of these helpers (issue 23: one module per concept). Nothing here escapes markdown:
core.markdown_text builds on `clean` and `one_line`, and the report modules wrap the number texts
as markdown where a template prints them.
"""

from __future__ import annotations

import math
import re
from typing import Any

EMPTY = "—"  # what an empty value shows
REPLACEMENT = "\ufffd"
CLIP = "..."  # ends a clipped text

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # C0/C1 controls but tab, LF, CR


def clean(value: Any) -> str:
    """str(value) with NUL and the other control characters (but tab and newlines) as U+FFFD."""
    return _CONTROL.sub(REPLACEMENT, "" if value is None else str(value))


def one_line(value: Any) -> str:
    """clean(value) with every run of whitespace, newlines included, as one space."""
    return " ".join(clean(value).split())


def clip(text: str, limit: int, *, strip_end: bool = False) -> str:
    """`text` at most `limit` characters: a longer one is cut and ends in "..." (`strip_end`: with
    the white space before the "..." dropped)."""
    if len(text) <= limit:
        return text
    kept = text[: limit - len(CLIP)]
    return (kept.rstrip() if strip_end else kept) + CLIP


def finite(value: Any) -> float | None:
    """`value` as a finite float; None for None, booleans, text that is no number, nan and inf."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def ms_text(value: Any) -> str:
    """Milliseconds with 3 decimals and thousands separators; a dash when missing."""
    number = finite(value)
    return EMPTY if number is None else f"{number:,.3f}"


def percent_text(value: Any) -> str:
    """A percentage with 1 decimal (no % sign); tiny non-zero values as <0.1 (or >-0.1)."""
    number = finite(value)
    if number is None:
        return EMPTY
    if 0 < abs(number) < 0.05:
        return "<0.1" if number > 0 else ">-0.1"
    return f"{number:.1f}"


def signed_ms_text(value: Any) -> str:
    """A difference in milliseconds, with its sign; a dash when missing."""
    number = finite(value)
    return EMPTY if number is None else f"{number:+,.3f}"


def signed_percent_text(value: Any) -> str:
    """A difference in percent or percentage points, with its sign; a dash when missing."""
    number = finite(value)
    return EMPTY if number is None else f"{number:+.1f}"


def bytes_text(value: Any) -> str:
    """A size in decimal units with 3 significant digits (192 B, 24.6 kB, 1.58 MB, 3.26 GB); a dash when
    missing: collective messages run from a few bytes to gigabytes, so one fixed unit prints 0.000."""
    number = finite(value)
    if number is None:
        return EMPTY
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(number) >= scale:
            return f"{number / scale:.3g} {unit}"
    return f"{number:.0f} B"
