"""The top findings of each report, as the closing notes' before/after tables print them.

    python bench/findings_table.py REPORTS_DIR [--top N]
    python bench/findings_table.py REPORTS_DIR --replay

REPORTS_DIR holds one `tracelake analyze` output folder per trace (each with priority_data.json).
`--replay` prints, per trace, what the what-if replay says of its findings: the kernel-level
estimates summed, the replayed savings summed, all findings replayed together, the unchanged
replay's error, and each finding realisable only after another ("P<n> after P<m>").
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


def _name(folder: Path) -> str:
    return f"{folder.parent.parent.name}/{folder.name}" if folder.parent.name == "ranks" else folder.name


def replay_row(folder: Path) -> str:
    data = json.loads((folder / "priority_data.json").read_text())
    summary = data.get("replay")
    if not summary:
        return f"| {_name(folder)} | - | - | - | - | no replay (a job's report: its ranks are replayed one by one) |"
    e2e = data["e2e_time_ms"] or 1.0
    rank = {f["finding_id"]: f["global_rank"] for f in data["findings"]}
    after = [f"P{f['global_rank']} after P{rank[f['realisable_after']]}" for f in data["findings"]
             if f.get("realisable_after") in rank]
    return (f"| {_name(folder)} | {summary['kernel_level_sum_ms']:.3f} | {summary['replayed_sum_ms']:.3f} | "
            f"{summary['combined_ms']:.3f} ({100 * summary['combined_ms'] / e2e:.1f} %) | "
            f"{abs(summary['unchanged_error_us']):.3f} | {', '.join(after) or 'none'} |")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path)
    parser.add_argument("--top", type=int, default=3)
    parser.add_argument("--replay", action="store_true", help="the replay table instead of the top findings")
    args = parser.parse_args(argv)
    # a job's folder holds its ranks' reports under ranks/
    folders = sorted(p.parent for p in [*args.reports.glob("*/priority_data.json"),
                                         *args.reports.glob("*/ranks/*/priority_data.json")])
    if not folders:
        print(f"error: no */priority_data.json under {args.reports}", file=sys.stderr)
        return 2
    if args.replay:
        print("| trace | kernel-level sum (ms) | replayed sum (ms) | all together (ms, % of E2E) | "
              "unchanged error (µs) | realisable only after another |")
        print("|---|---|---|---|---|---|")
        print("\n".join(replay_row(folder) for folder in folders))
        return 0
    print("| trace | P | agent | title | impact (% of E2E) | estimate |")
    print("|---|---|---|---|---|---|")
    for folder in folders:
        print("\n".join(rows(folder, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
