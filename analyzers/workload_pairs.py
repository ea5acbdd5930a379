"""Like with like for `tracelake compare`: the baseline's and the candidate's traces are paired by
the workload they ran (`trace_workloads`: the model tag, else the identified model, else the run
group's model), each pair is judged on its own (analyzers/regression.py) and the traces left
without a partner are named.

When each side holds one workload, the two are the pair, whatever their keys (the user named them;
the op-signature overlap still refuses a verdict on different work). When a side holds several,
only equal keys pair. Nothing paired: NotComparableError.

The run's verdict: a regression when any comparable pair regressed, else an improvement when one
improved, else no change; `not_comparable` when no pair had enough op signatures in common.
"""

from __future__ import annotations

from typing import Literal

import duckdb
from pydantic import BaseModel

from tracelake.analyzers.common import query_rows
from tracelake.analyzers.regression import CompareSettings, RegressionVerdict, VerdictKind, compare
from tracelake.core.errors import TraceLakeError

PairedBy = Literal["workload", "one workload each side"]
WORKLOADS_LISTED = 6  # workloads named in the one-line refusal

WORKLOADS_SQL = ("select trace_id, file_name, workload, workload_source from trace_workloads "
                 "where trace_id in (select unnest($1)) order by workload, trace_id")


class NotComparableError(TraceLakeError):
    """No workload of the baseline is in the candidate: there is nothing like with like to judge."""


class SideTrace(BaseModel):
    trace_id: str
    file_name: str
    workload: str
    workload_source: str  # model tag | identified model | job | file name


class WorkloadPair(BaseModel):
    """One workload on both sides and its verdict."""

    workload: str  # the baseline's key (the candidate's is the same when paired by workload)
    candidate_workload: str
    paired_by: PairedBy
    baseline_traces: list[SideTrace]
    candidate_traces: list[SideTrace]
    verdict: RegressionVerdict


class WorkloadComparison(BaseModel):
    """`tracelake compare --format json` for traces (job:A job:B is a JobComparison)."""

    verdict: VerdictKind
    regression: bool  # the CLI exits 1 when true
    summary: str  # the verdict line
    pairs: list[WorkloadPair]
    unpaired_baseline: list[SideTrace]  # traces whose workload the candidate does not run
    unpaired_candidate: list[SideTrace]
    warehouse_snapshot: int | None = None  # the lakehouse snapshot judged (`tracelake sql --at N`)


def _by_workload(traces: list[SideTrace]) -> dict[str, list[SideTrace]]:
    grouped: dict[str, list[SideTrace]] = {}
    for trace in traces:
        grouped.setdefault(trace.workload, []).append(trace)
    return grouped


def _side(db: duckdb.DuckDBPyConnection, trace_ids: list[str]) -> list[SideTrace]:
    rows = query_rows(db, WORKLOADS_SQL, [list(dict.fromkeys(trace_ids))])
    missing = sorted(set(trace_ids) - {r["trace_id"] for r in rows})
    if missing:
        raise TraceLakeError(f"trace {missing[0]} is not in the warehouse; `tracelake traces` lists them")
    return [SideTrace(**row) for row in rows]


def _names(groups: dict[str, list[SideTrace]]) -> str:
    keys = sorted(groups)
    return ", ".join(keys[:WORKLOADS_LISTED]) + (", ..." if len(keys) > WORKLOADS_LISTED else "")


def pair_traces(baseline: list[SideTrace], candidate: list[SideTrace]
                ) -> tuple[list[tuple[PairedBy, list[SideTrace], list[SideTrace]]], list[SideTrace], list[SideTrace]]:
    """(the pairs, the baseline's unpaired traces, the candidate's unpaired traces)."""
    base_groups, cand_groups = _by_workload(baseline), _by_workload(candidate)
    if len(base_groups) == 1 and len(cand_groups) == 1:
        return [("one workload each side", baseline, candidate)], [], []
    shared = sorted(base_groups.keys() & cand_groups.keys())
    if not shared:
        raise NotComparableError(
            f"not comparable: the baseline's workloads ({_names(base_groups)}) and the candidate's "
            f"({_names(cand_groups)}) have none in common; tag the traces of one model alike (--tag model=NAME) "
            "or compare one workload per side")
    pairs: list[tuple[PairedBy, list[SideTrace], list[SideTrace]]] = [
        ("workload", base_groups[key], cand_groups[key]) for key in shared]
    unpaired_base = [t for key, group in base_groups.items() if key not in cand_groups for t in group]
    unpaired_cand = [t for key, group in cand_groups.items() if key not in base_groups for t in group]
    return pairs, unpaired_base, unpaired_cand


def _unpaired_text(side: str, traces: list[SideTrace]) -> str:
    names = ", ".join(sorted({t.workload for t in traces}))
    return f"{len(traces)} {side} trace{'' if len(traces) == 1 else 's'} ({names})"


def _summary(verdict: VerdictKind, pairs: list[WorkloadPair], unpaired_base: list[SideTrace],
             unpaired_cand: list[SideTrace]) -> str:
    if len(pairs) == 1 and not unpaired_base and not unpaired_cand:
        return pairs[0].verdict.summary
    counts = {kind: [p.workload for p in pairs if p.verdict.verdict == kind]
              for kind in ("regression", "improvement", "no_change", "not_comparable")}
    judged = {"regression": "slower", "improvement": "faster", "no_change": "unchanged",
              "not_comparable": "not comparable (too few op signatures in common)"}
    parts = [f"{len(names)} {judged[kind]} ({', '.join(names)})" for kind, names in counts.items() if names]
    unpaired = [_unpaired_text(side, traces) for side, traces in (("baseline", unpaired_base),
                                                                   ("candidate", unpaired_cand)) if traces]
    tail = f"; unpaired: {', '.join(unpaired)}" if unpaired else ""
    return f"{verdict.replace('_', ' ').upper()}: {len(pairs)} paired workloads: {'; '.join(parts)}{tail}"


def _overall(pairs: list[WorkloadPair]) -> VerdictKind:
    kinds = {p.verdict.verdict for p in pairs}
    for kind in ("regression", "improvement", "no_change"):
        if kind in kinds:
            return kind
    return "not_comparable"


def compare_workloads(db: duckdb.DuckDBPyConnection, baseline_ids: list[str], candidate_ids: list[str],
                      config: CompareSettings | None = None) -> WorkloadComparison:
    """Pair the two sides' traces by workload and judge each pair (analyzers/regression.compare)."""
    config = config or CompareSettings()
    pairing, unpaired_base, unpaired_cand = pair_traces(_side(db, baseline_ids), _side(db, candidate_ids))
    pairs = [
        WorkloadPair(workload=base[0].workload, candidate_workload=cand[0].workload, paired_by=paired_by,
                     baseline_traces=base, candidate_traces=cand,
                     verdict=compare(db, [t.trace_id for t in base], [t.trace_id for t in cand], config))
        for paired_by, base, cand in pairing
    ]
    verdict = _overall(pairs)
    return WorkloadComparison(
        verdict=verdict, regression=verdict == "regression", pairs=pairs,
        summary=_summary(verdict, pairs, unpaired_base, unpaired_cand),
        unpaired_baseline=unpaired_base, unpaired_candidate=unpaired_cand)
