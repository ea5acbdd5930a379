"""Markdown for `tracelake compare job:A job:B`: the verdict line, the two jobs, the per-rank spread
and the collective signatures. Only arranges and formats a JobComparison; job and collective names
are data, written as code cells."""

from __future__ import annotations

import math

from tracelake.analyzers.job_compare import JobComparison, JobSide, SignatureChange, SpreadChange
from tracelake.core.markdown_text import code_cell, text

DASH = "\u2014"
SIGNATURES_LISTED = 30  # signature rows in the markdown; --format json has them all


def _num(value: float | None, digits: int = 3) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return DASH if value is None or not math.isfinite(value) else f"{value:+.1f} %"


def _bytes(value: int | None) -> str:
    return DASH if value is None else f"{value:,}"


def _side_row(label: str, side: JobSide) -> str:
    straggler = (f"rank {side.straggler_rank} (last in {side.straggler_times_arrived_last} of "
                 f"{side.collective_count}, waits {_num(side.straggler_wait_ms)} ms)"
                 if side.straggler_rank is not None else "no matched collective")
    return (f"| {label} | {code_cell(side.job_id)} | {side.rank_count} / {side.world_size or '?'} | "
            f"{text(', '.join(side.platforms)) or DASH} | {straggler} |")


def _spread_row(spread: SpreadChange) -> str:
    return (f"| {spread.metric.replace('_', ' ')} | {_num(spread.baseline_min_ms)} · {_num(spread.baseline_median_ms)} · "
            f"{_num(spread.baseline_max_ms)} | {_num(spread.candidate_min_ms)} · {_num(spread.candidate_median_ms)} · "
            f"{_num(spread.candidate_max_ms)} | {_pct(spread.median_change_percent)} | {_pct(spread.max_change_percent)} |")


def _signature_row(sig: SignatureChange) -> str:
    name = f"{sig.collective_name or 'unknown'} {sig.dtype}".strip()
    return (f"| {code_cell(name)} | {_bytes(sig.msg_bytes)} | {sig.group_size or DASH} | {sig.node_span or DASH} | "
            f"{sig.status} | {sig.baseline_count or 0} / {sig.candidate_count or 0} | "
            f"{_num(sig.baseline_latency_us, 1)} / {_num(sig.candidate_latency_us, 1)} | "
            f"{_pct(sig.latency_change_percent)} | {_num(sig.baseline_bus_gb_per_s, 2)} / "
            f"{_num(sig.candidate_bus_gb_per_s, 2)} | {_num(sig.baseline_wait_ms)} / {_num(sig.candidate_wait_ms)} | "
            f"{sig.baseline_bound or DASH} / {sig.candidate_bound or DASH} |")


def render_job_compare_md(comparison: JobComparison) -> str:
    lines = [comparison.summary, ""]
    if comparison.failures:
        lines += ["Failing: " + ", ".join(comparison.failures) + ".", ""]
    lines += ["## Jobs", "", "| side | job | ranks present / world size | platform | straggler |", "|---|---|---|---|---|",
              _side_row("baseline", comparison.baseline), _side_row("candidate", comparison.candidate), ""]
    lines += ["## Per-rank spread (ms)", "", "min · median · max over the ranks.", "",
              "| metric | baseline | candidate | median change | max change |", "|---|---|---|---|---|",
              *(_spread_row(s) for s in comparison.spreads), ""]
    shown = comparison.signatures[:SIGNATURES_LISTED]
    lines += ["## Collective signatures", "",
              "Latency: the median over the instances of the fastest rank's duration (TraceLens' comm_latency); bus "
              "bandwidth: its median, GB/s; wait: summed over the instances and their ranks; bound: "
              "collective_signatures' class. Baseline / candidate.", "",
              "| collective | message bytes | group | span | status | count | latency (µs) | latency change | "
              "bus bandwidth (GB/s) | wait (ms) | bound |", "|---|---|---|---|---|---|---|---|---|---|---|",
              *(_signature_row(s) for s in shown)]
    if len(comparison.signatures) > len(shown):
        lines += ["", f"{len(comparison.signatures) - len(shown)} more signatures in `--format json`."]
    return "\n".join(lines) + "\n"
