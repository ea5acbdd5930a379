"""The claims of the system agents' findings (cpu_idle: idle gaps; multi_kernel: GPU events), on
every trace of the session warehouse: every quantified finding claims, the claims add up to the
GPU time its impact is computed from, and every claimed id is a row of the marts."""

from __future__ import annotations

import duckdb
import pytest

from tests.analyzers.test_system_analyzers import context_of
from tracelake.analyzers import cpu_idle, multi_kernel, settings
from tracelake.analyzers.contracts import AnalysisContext, Finding

# finding slug -> the mid fraction its impact ladder applies to the claimed time
MID_FRACTION = {
    "cpu_idle:launch-bound": settings.IDLE_RECOVERY_FRACTIONS[1],
    "cpu_idle:host-overhead": settings.IDLE_RECOVERY_FRACTIONS[1],
    "cpu_idle:sync-blocked": settings.IDLE_RECOVERY_FRACTIONS[1],
    "cpu_idle:host-work": settings.BUBBLE_RECOVERY_FRACTIONS[1],
    "multi_kernel:comm-overlap": settings.OVERLAP_RECOVERY_FRACTIONS[1],
    "multi_kernel:exposed-comm": settings.HEURISTIC_FRACTION_MID,
    "multi_kernel:memcpy-d2h": settings.OVERLAP_RECOVERY_FRACTIONS[1],
    "multi_kernel:memcpy-h2d": settings.OVERLAP_RECOVERY_FRACTIONS[1],
}


@pytest.fixture(scope="module")
def findings(db: duckdb.DuckDBPyConnection) -> list[tuple[AnalysisContext, Finding]]:
    """Every finding of both agents on every trace with a GPU timeline."""
    out = []
    for (trace_id,) in db.execute("select trace_id from gpu_timeline order by trace_id").fetchall():
        ctx = context_of(db, trace_id)
        for module in (cpu_idle, multi_kernel):
            out.extend((ctx, f) for f in module.analyze(db, ctx).findings)
    return out


def _quantified(found: list[tuple[AnalysisContext, Finding]]) -> list[tuple[AnalysisContext, Finding]]:
    return [(ctx, f) for ctx, f in found if f.impact_score is not None]


def test_the_warehouse_has_quantified_findings_of_both_agents(findings) -> None:
    agents = {f.agent for _, f in _quantified(findings)}
    assert agents == {"cpu_idle", "multi_kernel"}
    assert len(_quantified(findings)) >= 6  # launch-bound x 3 (BERT x 2, B200), B200 host work, ResNet collectives x 2


def test_claims_add_up_to_the_time_the_impact_is_computed_from(findings) -> None:
    for ctx, f in _quantified(findings):
        claims = f.claimed_gaps if f.agent == "cpu_idle" else f.claimed_kernels
        assert claims, f.finding_id
        assert not (f.claimed_gaps and f.claimed_kernels), f.finding_id
        claimed_ms = sum(claims.values()) / 1000
        assert claimed_ms == pytest.approx(f.evidence["impact_basis_ms"], abs=1e-6), f.finding_id
        modeled = f.evidence.get("modeled_saving_ms")
        if modeled is None:  # a fixed share of the claimed time
            expected_score = 100.0 * claimed_ms / ctx.e2e_time_ms * MID_FRACTION[f.finding_id]
        elif isinstance(modeled, list):  # pinned copies: (pinning alone, pinned and overlapped)
            expected_score = 100.0 * sum(modeled) / 2.0 / ctx.e2e_time_ms
        else:  # collectives above the link floor, at the quantified ladder's mid
            expected_score = 100.0 * settings.TARGET_MID * modeled / ctx.e2e_time_ms
        assert f.impact_score == pytest.approx(expected_score, abs=1e-3), f.finding_id
        assert f.impact_high <= 100.0 * claimed_ms / ctx.e2e_time_ms + 1e-3, f.finding_id  # never more than it claims
        assert all(us > 0 for us in claims.values()), f.finding_id


def test_qualitative_findings_claim_nothing(findings) -> None:
    qualitative = [f for _, f in findings if f.impact_score is None]
    assert qualitative  # sglang's profile-window edge, b200's count-only H2D copies
    assert all(not f.claimed_gaps and not f.claimed_kernels for f in qualitative)


def test_claimed_gaps_exist_and_claim_their_time_above_the_residual(db, findings) -> None:
    for ctx, f in _quantified(findings):
        if f.agent != "cpu_idle":
            continue
        durations = dict(db.execute("select gap_id, duration_us from gpu_idle_gaps where trace_id = ?",
                                    [ctx.trace_id]).fetchall())
        assert set(f.claimed_gaps) <= set(durations), f.finding_id
        classes = dict(db.execute("select gap_id, gap_class from gpu_idle_gaps where trace_id = ?",
                                  [ctx.trace_id]).fetchall())
        for gap_id, claimed_us in f.claimed_gaps.items():
            assert claimed_us == pytest.approx(durations[gap_id] - settings.RESIDUAL_GAP_US, abs=1e-9)
            assert classes[gap_id] == f.evidence["gap_class"], f.finding_id  # a finding claims its class's gaps


def test_claimed_kernels_exist_and_claim_at_most_their_exposed_time(db, findings) -> None:
    for ctx, f in _quantified(findings):
        if f.agent != "multi_kernel":
            continue
        source = "gpu_transfers" if f.finding_id.startswith("multi_kernel:memcpy") else "gpu_event_exposure"
        bucket = "transfer_kind = 'memcpy'" if source == "gpu_transfers" else "gpu_bucket = 'communication'"
        exposed = dict(db.execute(f"select event_idx, exposed_us from {source} where trace_id = ? and {bucket}",
                                  [ctx.trace_id]).fetchall())
        assert set(f.claimed_kernels) <= set(exposed), f.finding_id
        assert all(us <= exposed[idx] + 1e-9 for idx, us in f.claimed_kernels.items()), f.finding_id


def test_no_gap_or_kernel_is_claimed_twice_within_an_agent(findings) -> None:
    """Gap classes are disjoint; the two collective findings split the exposed time in start order,
    sharing at most the one collective the split falls in, whose parts add up to its exposed time."""
    by_trace: dict[tuple[str, str], list[Finding]] = {}
    for ctx, f in _quantified(findings):
        by_trace.setdefault((ctx.trace_id, f.agent), []).append(f)
    for (_, agent), found in by_trace.items():
        claims = [f.claimed_gaps if agent == "cpu_idle" else f.claimed_kernels for f in found]
        shared = set.intersection(*map(set, claims)) if len(claims) > 1 else set()
        assert len(shared) <= (0 if agent == "cpu_idle" else 1), (agent, shared)


def test_resnet_collective_claims_cover_the_exposed_communication(db, findings) -> None:
    """ResNet (MI300X): both collective findings; the overlap finding claims exactly the exposed time
    free computation can hide, the other the collectives after it: no collective in both, and
    together no more than the timeline's exposed communication."""
    by_id = {f.finding_id: (ctx, f) for ctx, f in findings if f.agent == "multi_kernel"}
    ctx, overlap = by_id["multi_kernel:comm-overlap"]
    _, exposed = by_id["multi_kernel:exposed-comm"]
    exposed_ms = db.execute("select exposed_comm_time_ms from gpu_timeline where trace_id = ?",
                            [ctx.trace_id]).fetchone()[0]
    assert set(overlap.claimed_kernels).isdisjoint(exposed.claimed_kernels)
    total = (sum(overlap.claimed_kernels.values()) + sum(exposed.claimed_kernels.values())) / 1000
    assert exposed_ms * 0.5 < total <= exposed_ms + 1e-6
    assert sum(overlap.claimed_kernels.values()) / 1000 == pytest.approx(overlap.evidence["hideable_comm_time_ms"],
                                                                         abs=1e-4)


def test_evidence_sql_still_runs_over_the_marts(db, findings) -> None:
    for _, f in findings:
        assert db.execute(f.evidence_sql).fetchall(), f.finding_id
    for _, f in _quantified(findings):
        if f.agent != "cpu_idle":
            continue
        cursor = db.execute(f.evidence_sql)
        columns = [d[0] for d in cursor.description]
        classes = {row[0]: dict(zip(columns, row)) for row in cursor.fetchall()}
        gap_class = f.evidence["gap_class"]
        assert classes[gap_class]["recoverable_time_ms"] == pytest.approx(f.evidence["impact_basis_ms"], abs=1e-6)


def test_copy_claims_add_up_to_each_directions_exposed_time(db) -> None:
    """No test trace has a quantified copy finding, so the copy claims are checked where they come
    from: per trace and direction, they add up to the exposed copy time the finding would use."""
    checked = 0
    for (trace_id,) in db.execute("select trace_id from gpu_timeline").fetchall():
        result = multi_kernel.analyze(db, context_of(db, trace_id))
        claims = multi_kernel._claimed_copies(db, trace_id)
        for direction, stats in result.metrics["memcpy_by_direction"].items():
            assert sum(claims[direction].values()) / 1000 == pytest.approx(stats["exposed_time_ms"], abs=1e-4)
            checked += bool(claims[direction])
    assert checked >= 5
