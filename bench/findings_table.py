"""The top findings of each report, as the closing notes' before/after tables print them.

    python bench/findings_table.py REPORTS_DIR [--top N]

REPORTS_DIR holds one `tracelake analyze` output folder per trace (each with priority_data.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def rows(folder: Path, top: int) -> list[str]:
    data = json.loads((folder / "priority_data.json").read_text())
    lines = []
    for finding in data["findings"][:top]:
        low, high = finding.get("impact_low"), finding.get("impact_high")
        impact = f"{low:.1f}-{high:.1f} %" if low is not None and high is not None else "no estimate"
        lines.append(f"| {folder.name} | P{finding['global_rank']} | {finding['agent']} | "
                     f"{finding['title'][:90]} | {impact} | {finding['estimate_method']} |")
    return lines or [f"| {folder.name} | - | - | no finding | - | - |"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path)
    parser.add_argument("--top", type=int, default=3)
    args = parser.parse_args(argv)
    folders = sorted(p.parent for p in args.reports.glob("*/priority_data.json"))
    if not folders:
        print(f"error: no */priority_data.json under {args.reports}", file=sys.stderr)
        return 2
    print("| trace | P | agent | title | impact (% of E2E) | estimate |")
    print("|---|---|---|---|---|---|")
    for folder in folders:
        print("\n".join(rows(folder, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
