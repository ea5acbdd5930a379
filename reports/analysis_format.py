"""Numbers and values as analysis.md prints them: markdown, so the template prints them as they are.

The digits come from core.text_format (the one home of number formatting); this module adds what a
report table needs on top: units by evidence key, literal text cells and short names.
"""

from __future__ import annotations

import json
from typing import Any

from tracelake.analyzers.contracts import RankedFinding
from tracelake.core.kernel_names import KERNEL_NAME_MAX_CHARS, short_kernel_name, shortens
from tracelake.core.markdown_text import EMPTY, Markdown, one_line, text
from tracelake.core.text_format import (
    clip,
    finite,
    ms_text,
    percent_text,
    signed_ms_text,
    signed_percent_text,
)

DASH = EMPTY
# Outside the appendix no code span or table cell is longer than a short kernel name: kernel names
# are shortened (core.kernel_names) and listed whole in the appendix's "Kernel names" table.
NAME_MAX_CHARS = KERNEL_NAME_MAX_CHARS


def fmt_ms(value: Any) -> Markdown:
    """Milliseconds with 3 decimals; a dash when missing."""
    return Markdown(ms_text(value))


def fmt_pct(value: Any) -> Markdown:
    """A percentage with 1 decimal (no % sign); tiny non-zero values as <0.1."""
    return Markdown(percent_text(value))


def fmt_signed_ms(value: Any) -> Markdown:
    return Markdown(signed_ms_text(value))


def fmt_signed_pct(value: Any) -> Markdown:
    return Markdown(signed_percent_text(value))


def fmt_value(key: str, value: Any) -> Markdown:
    """An evidence value for a Data table cell: units by key suffix, compact JSON for structures,
    strings (trace names among them) as literal text."""
    if value is None:
        return Markdown(DASH)
    if isinstance(value, bool):
        return Markdown("yes" if value else "no")
    if isinstance(value, int):
        return Markdown(f"{value:,}" if abs(value) >= 10000 else str(value))
    if isinstance(value, float):
        number = finite(value)
        if number is None:
            return Markdown(DASH)
        if key.endswith(("_ms", "_time_ms")):
            return Markdown(f"{number:,.3f} ms")
        if key.endswith("_us"):
            return Markdown(f"{number:,.1f} us")
        if "percent" in key or key.endswith("_pct") or key.startswith("pct_"):
            return Markdown(f"{fmt_pct(number)}%")
        return Markdown(f"{number:.4g}")
    if isinstance(value, dict):
        items = [f"{k}: {_scalar(v)}" for k, v in list(value.items())[:8]]
        return cell(", ".join(items) + (f", ... ({len(value)} keys)" if len(value) > 8 else "")) if items \
            else Markdown(DASH)
    if isinstance(value, (list, tuple)):
        if not value:
            return Markdown(DASH)
        if any(isinstance(v, (dict, list, tuple)) for v in value):
            return Markdown(f"{len(value)} entries (see the finding's SQL in the Appendix)")
        items = [_scalar(v) for v in value[:10]]
        return cell(", ".join(items) + (f", ... ({len(value)} in all)" if len(value) > 10 else ""))
    return cell(str(value))


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        number = finite(value)
        return DASH if number is None else f"{number:.4g}"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)[:40]
    return DASH if value is None else str(value)


def cell(value: Any) -> Markdown:
    """`value` as literal text for a table cell (a dash when empty)."""
    return text(value) or Markdown(DASH)

def shown_name(name: str) -> str:
    """An op or kernel name as a table shows it: a kernel name short (core.kernel_names, the full
    name in the appendix), any other name clipped to NAME_MAX_CHARS (the SQL shows it whole)."""
    if shortens(name, NAME_MAX_CHARS):
        return short_kernel_name(name, NAME_MAX_CHARS)
    return clip(name, NAME_MAX_CHARS, strip_end=True)


def card_title(finding: RankedFinding) -> Markdown:
    """A finding's title as its card and its Detailed Analysis heading show it."""
    return text(one_line(finding.title))
