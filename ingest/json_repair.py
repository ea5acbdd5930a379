"""Make trace JSON that msgspec rejects decodable, changing only what cannot be kept as written.

Ingest calls `valid_utf8` on every file (a C-speed check) and `repair_json` only after msgspec
failed to parse the document, so a valid trace never pays for the scan. The repairs keep the data:

- invalid UTF-8 bytes become U+FFFD (`repair_utf8`);
- raw control characters inside strings become `\\u00XX` escapes, invalid escapes keep their
  backslash as text (`\\q` -> `\\\\q`), lone UTF-16 surrogate escapes become `\\ufffd`;
- NaN / Infinity literals (Python's json and printf write them) become the strings "NaN",
  "Infinity", so the event's number is reported as not numeric instead of failing the file;
- containers nested deeper than `max_depth` become null (msgspec recurses per level);
- a leading UTF-8 byte-order mark is dropped.

The scan is vectorized with numpy: escaping backslashes and the quotes they do not escape give
the string spans, and every fix is a (start, end, replacement) edit outside or inside them.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa

_BACKSLASH, _QUOTE = 0x5C, 0x22
_VALID_ESCAPES = np.zeros(256, dtype=bool)
_VALID_ESCAPES[list(b'"\\/bfnrtu')] = True
_HEX = np.zeros(256, dtype=bool)
_HEX[list(b"0123456789abcdefABCDEF")] = True
_JSON_WHITESPACE = (0x09, 0x0A, 0x0D)
# A non-finite literal where a JSON value can stand (after `:`, `,` or `[`), in any case printf
# or Python write it.
_NON_FINITE = re.compile(rb"(?<=[:,\[\s])(-?(?:[Ii]nfinity|[Ii][Nn][Ff]|[Nn]a[Nn]))(?=[\s,\]\}])")
_REPLACEMENT_ESCAPE = b"\\ufffd"
_UTF8_REPLACEMENT = "\ufffd".encode()
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"
_Edit = tuple[int, int, bytes, str]  # replace data[start:end] by the bytes; the kind of fix


def valid_utf8(data: bytes) -> bool:
    """True when `data` is valid UTF-8 (ASCII is checked first; both run at memory speed)."""
    if data.isascii():
        return True
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    text = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        text.view(pa.large_string()).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def repair_utf8(data: bytes) -> tuple[bytes, int]:
    """`data` with each invalid UTF-8 sequence replaced by U+FFFD, and how many were replaced."""
    repaired = data.decode("utf-8", errors="replace").encode("utf-8")
    return repaired, repaired.count(_UTF8_REPLACEMENT) - data.count(_UTF8_REPLACEMENT)


def _escaping_backslashes(b: np.ndarray) -> np.ndarray:
    """Positions of the backslashes that escape the next byte (the 1st, 3rd, ... of each run)."""
    slashes = np.flatnonzero(b == _BACKSLASH)
    if slashes.size == 0:
        return slashes
    run_starts = np.flatnonzero(np.r_[True, np.diff(slashes) != 1])
    run_of = np.repeat(run_starts, np.diff(np.r_[run_starts, slashes.size]))
    offset_in_run = np.arange(slashes.size) - run_of
    escaping = slashes[offset_in_run % 2 == 0]
    return escaping[escaping + 1 < b.size]


def _inside(quotes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Which positions lie inside a string (after an odd number of unescaped quotes)."""
    return (np.searchsorted(quotes, positions, side="right") % 2) == 1


def _surrogate_edits(data: bytes, u_escapes: np.ndarray) -> list[_Edit]:
    """`\\uD800`-`\\uDFFF` escapes that are not a high + low pair -> `\\ufffd`. Rare: a loop."""
    b = np.frombuffer(data, dtype=np.uint8)
    first = b[u_escapes + 2] | 0x20
    second = b[u_escapes + 3] | 0x20
    candidates = u_escapes[(first == ord("d")) & np.isin(second, list(b"89abcdef"))]
    edits: list[_Edit] = []
    paired_low = -1
    for start in candidates.tolist():
        if start == paired_low:
            continue
        value = int(data[start + 2 : start + 6], 16)
        if value < 0xDC00:  # high surrogate: needs a low one right after
            low = data[start + 6 : start + 12]
            if len(low) == 6 and low[:2] == b"\\u" and 0xDC00 <= _hex_value(low[2:]) <= 0xDFFF:
                paired_low = start + 6
                continue
        edits.append((start, start + 6, _REPLACEMENT_ESCAPE, "lone_surrogates"))
    return edits


def _hex_value(digits: bytes) -> int:
    try:
        return int(digits, 16)
    except ValueError:
        return -1


def _deep_container_edits(b: np.ndarray, quotes: np.ndarray, max_depth: int) -> list[_Edit]:
    """Each container that opens at depth max_depth + 1 -> null (its whole text)."""
    brackets = np.flatnonzero(((b | 0x20) == 0x7B) | ((b | 0x20) == 0x7D))  # [ { and ] }
    brackets = brackets[~_inside(quotes, brackets)]
    if brackets.size == 0:
        return []
    opens = (b[brackets] | 0x20) == 0x7B
    depth_after = np.cumsum(np.where(opens, 1, -1))
    roots = np.flatnonzero(opens & (depth_after == max_depth + 1))
    if roots.size == 0:
        return []
    closes_to_limit = np.flatnonzero(~opens & (depth_after == max_depth))
    match = np.searchsorted(closes_to_limit, roots)
    matched = match < closes_to_limit.size
    starts = brackets[roots[matched]]
    ends = brackets[closes_to_limit[match[matched]]] + 1
    return [(s, e, b"null", "nesting_too_deep") for s, e in zip(starts.tolist(), ends.tolist())]


def repair_json(data: bytes, max_depth: int) -> tuple[bytes, Counter[str]]:
    """`data` with the fixes of the module docstring applied, and how many of each were made.
    Returns `data` unchanged (and no counts) when its strings do not even pair up."""
    b = np.frombuffer(data, dtype=np.uint8)
    escaping = _escaping_backslashes(b)
    quotes = np.flatnonzero(b == _QUOTE)
    quotes = quotes[~np.isin(quotes, escaping + 1, assume_unique=True)]
    if quotes.size % 2:
        return data, Counter()
    edits: list[_Edit] = []

    controls = np.flatnonzero(b < 0x20)
    in_string = controls[_inside(quotes, controls)]
    edits += [(p, p + 1, b"\\u%04x" % b[p], "control_characters") for p in in_string.tolist()]

    escaping = escaping[_inside(quotes, escaping)]
    escaped = b[escaping + 1]
    invalid = ~_VALID_ESCAPES[escaped]
    u_escapes = escaping[escaped == ord("u")]
    u_escapes = u_escapes[u_escapes + 5 < b.size]
    hex_ok = np.ones(u_escapes.size, dtype=bool)
    for digit in range(2, 6):
        hex_ok &= _HEX[b[u_escapes + digit]]
    bad_u = np.isin(escaping, u_escapes[~hex_ok]) | ((escaped == ord("u")) & (escaping + 5 >= b.size))
    bad_escapes = escaping[invalid | bad_u]
    edits += [(p, p + 1, b"\\\\", "invalid_escapes") for p in bad_escapes.tolist()]
    edits += _surrogate_edits(data, u_escapes[hex_ok])

    literals = [(m.start(1), m.end(1)) for m in _NON_FINITE.finditer(data)]
    if literals:
        at = np.array([start for start, _ in literals], dtype=np.int64)
        outside = ~_inside(quotes, at)
        kept = [span for span, ok in zip(literals, outside.tolist()) if ok]
        edits += [(s, e, b'"' + data[s:e] + b'"', "non_finite_numbers") for s, e in kept]

    edits += _deep_container_edits(b, quotes, max_depth)
    if data.startswith(_BYTE_ORDER_MARK):
        edits.append((0, len(_BYTE_ORDER_MARK), b"", "byte_order_mark"))
    if not edits:
        return data, Counter()
    return _apply(data, edits)


def _apply(data: bytes, edits: list[_Edit]) -> tuple[bytes, Counter[str]]:
    """Apply the edits in order; one inside an earlier edit (in a nulled container) is moot."""
    pieces: list[bytes] = []
    applied: Counter[str] = Counter()
    done = 0
    for start, end, replacement, kind in sorted(edits, key=lambda edit: (edit[0], -edit[1])):
        if start < done:
            continue
        pieces += (data[done:start], replacement)
        applied[kind] += 1
        done = end
    pieces.append(data[done:])
    return b"".join(pieces), applied
