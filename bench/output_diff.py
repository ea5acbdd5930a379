"""Compare two folders written by bench/output_snapshot.py: which outputs differ, and how.

    python bench/output_diff.py /tmp/snap/before /tmp/snap/after

A file is `same` when its bytes are; `float noise` when it differs only in numbers that agree to
12 significant digits (DuckDB sums floats in parallel, in an order that varies from run to run, so
the last digit of a sum is not deterministic) or in clock readings; `row order` when it holds the
same lines in another order (rows that tie on a table's sort key, steps that ran in parallel);
otherwise `DIFFERENT`, with its first differing line. Exit 1 when a file differs, is missing or is new.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

CLOCKS = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?Z?|\b\d\d-\d\d \d\d:\d\d:\d\d\b")
NUMBER = re.compile(r"(-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+)")
RELATIVE_TOLERANCE = 1e-12


def _numbers_agree(left: str, right: str) -> bool:
    return math.isclose(float(left), float(right), rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)


def _same_but_noise(left: str, right: str) -> bool:
    left_parts = NUMBER.split(CLOCKS.sub("<clock>", left))
    right_parts = NUMBER.split(CLOCKS.sub("<clock>", right))
    if len(left_parts) != len(right_parts):
        return False
    for index, (a, b) in enumerate(zip(left_parts, right_parts)):
        if a != b and not (index % 2 == 1 and _numbers_agree(a, b)):
            return False
    return True


def _canonical_line(line: str) -> str:
    return NUMBER.sub(lambda m: f"{float(m.group()):.10g}", CLOCKS.sub("<clock>", line))


def _same_lines_other_order(left: str, right: str) -> bool:
    return sorted(map(_canonical_line, left.splitlines())) == sorted(map(_canonical_line, right.splitlines()))


def _first_difference(left: str, right: str) -> str:
    for number, (a, b) in enumerate(zip(left.splitlines(), right.splitlines()), start=1):
        if not _same_but_noise(a, b):
            return f"line {number}:\n    - {a[:300]}\n    + {b[:300]}"
    return f"line counts {len(left.splitlines())} vs {len(right.splitlines())}"


def compare(before: Path, after: Path) -> int:
    left_files = {p.relative_to(before) for p in before.rglob("*") if p.is_file()}
    right_files = {p.relative_to(after) for p in after.rglob("*") if p.is_file()}
    problems = 0
    for name in sorted(left_files - right_files):
        print(f"MISSING   {name}")
        problems += 1
    for name in sorted(right_files - left_files):
        print(f"NEW       {name}")
        problems += 1
    noise = reordered = 0
    for name in sorted(left_files & right_files):
        a, b = (before / name).read_bytes(), (after / name).read_bytes()
        if a == b:
            continue
        try:
            left, right = a.decode(), b.decode()
        except UnicodeDecodeError:
            print(f"DIFFERENT {name} (binary)")
            problems += 1
            continue
        if _same_but_noise(left, right):
            noise += 1
            continue
        if _same_lines_other_order(left, right):
            reordered += 1
            continue
        print(f"DIFFERENT {name} {_first_difference(left, right)}")
        problems += 1
    print(f"{len(left_files & right_files)} files in both; {noise} differ only in float noise or clocks, "
          f"{reordered} only in row order; {problems} differ, are missing or new")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
