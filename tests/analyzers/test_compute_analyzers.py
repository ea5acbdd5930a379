"""The compute-tier agents (analyzers/compute.py and the nine category modules) on the real traces
of tests/data: the impact ladder, grouping, re-labelling, ownership, evidence SQL and rendering."""

from __future__ import annotations

import importlib
from types import ModuleType

import duckdb
import jinja2
import pytest

from tests.conftest import EXPECTED_TRACES, trace_id_of
from tracelake.agents.registry import COMPUTE_AGENTS, by_name
from tracelake.agents.render import TEMPLATES, render_findings
from tracelake.analyzers import compute, compute_advice, settings
from tracelake.analyzers.agent_categories import load_agent_categories
from tracelake.analyzers.compute import OpRecord
from tracelake.analyzers.contracts import AgentResult, AnalysisContext

AGENTS = ("gemm", "sdpa", "elementwise", "reduce", "norm", "convolution", "moe", "triton", "generic")
TRACES = sorted(EXPECTED_TRACES.values())
QWEN_H100 = "h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT_H100 = "h100/gaunernst_bert-small-uncased__1016001.json.gz"
RESNET = "mi300/resnet_act_checkpoint.json.gz"
VLLM_GRAPH = "inference/vllm_decode_full/graph_execution.json.gz"
B200_EAGER = "b200/eager_trace.json.gz"
PLATFORM = "MI300X"


def agent(name: str) -> ModuleType:
    return importlib.import_module(f"tracelake.analyzers.{name}")


def context_for(db: duckdb.DuckDBPyConnection, trace: str, platform: str = PLATFORM, **extra) -> AnalysisContext:
    trace_id = trace_id_of(db, trace)
    total, computation = db.execute(
        "select total_time_ms, computation_time_ms from gpu_timeline where trace_id = ?", [trace_id]
    ).fetchone()
    verdicts = dict(db.execute("select check_name, verdict from trace_quality where trace_id = ?", [trace_id]).fetchall())
    return AnalysisContext(
        trace_id=trace_id, platform=platform, e2e_time_ms=total, computation_time_ms=computation,
        quality_verdicts=verdicts, **extra,
    )


@pytest.fixture(scope="module")
def results(db) -> dict[tuple[str, str], tuple[AnalysisContext, AgentResult]]:
    """Every agent on every trace, once (platform MI300X, no fusion flags)."""
    out = {}
    for trace in TRACES:
        ctx = context_for(db, trace)
        for name in AGENTS:
            out[(trace, name)] = (ctx, agent(name).analyze(db, ctx))
    return out


# ---- the impact ladder --------------------------------------------------------------------------


def test_quantified_ladder_matches_the_reference_worked_example() -> None:
    impact = compute.quantified_impact(time_ms=20.0, e2e_ms=200.0, efficiency_percent=40.0)
    assert impact.method == "quantified"
    assert (impact.high, impact.mid, impact.low) == pytest.approx((6.0, 5.25, 4.5))


def test_heuristic_ladder_matches_the_reference_worked_example() -> None:
    impact = compute.heuristic_impact(percent_of_e2e=10.0)
    assert impact.method == "heuristic"
    assert (impact.low, impact.mid, impact.high) == pytest.approx((1.5, 3.0, 4.5))


def _op(**fields) -> OpRecord:
    base = dict(signature_key="t:P:x", name="aten::mm", op_category="GEMM", count=1, time_ms=20.0, mean_us=20_000.0,
                percent_of_e2e=10.0, has_perf_model=True, efficiency_percent=40.0, bound="compute")
    return OpRecord(**(base | fields))


def test_per_op_ladder_skips_anomalies_fusion_flagged_ops_and_the_floor() -> None:
    ctx = AnalysisContext(trace_id="t", platform="P", e2e_time_ms=200.0, computation_time_ms=150.0)
    # the gap is to the attainable share (80 %), not to 100 %: (1 - 40 / 80) x 10 % of E2E
    assert settings.ATTAINABLE_ROOFLINE_PERCENT == 80.0
    assert compute.estimate_op_impact(_op(), ctx).high == pytest.approx(5.0)
    assert compute.estimate_op_impact(_op(efficiency_percent=settings.EFFICIENCY_ANOMALY_PERCENT + 1), ctx) is None
    assert compute.estimate_op_impact(_op(efficiency_percent=105.0), ctx) is None  # above the attainable share
    near = _op(efficiency_percent=82.0)
    assert near.is_near_roofline and compute.estimate_op_impact(near, ctx) is None  # fine: claims nothing
    assert compute.estimate_op_impact(_op(efficiency_percent=82.0, attainable_percent=90.0), ctx) is not None
    flagged = ctx.model_copy(update={"fusion_flagged_ops": {"aten::mm": "MLP"}})
    assert compute.estimate_op_impact(_op(), flagged) is None
    unmodeled = compute.estimate_op_impact(_op(has_perf_model=False, efficiency_percent=None), ctx)
    assert (unmodeled.method, unmodeled.mid) == ("heuristic", pytest.approx(3.0))


def test_groups_below_the_pitem_threshold_are_dropped() -> None:
    ctx = AnalysisContext(trace_id="t", platform="P", e2e_time_ms=200.0, computation_time_ms=150.0)
    big = _op(signature_key="a")
    small = _op(signature_key="b", name="aten::bmm", time_ms=0.5, percent_of_e2e=0.25, efficiency_percent=10.0, bound="memory")
    for op in (big, small):
        op.impact = compute.estimate_op_impact(op, ctx)
    kept, dropped = compute.group_ops([big, small], lambda op: "dense")
    assert [g.dominant.signature_key for g in kept] == ["a"]
    assert [g.dominant.signature_key for g in dropped] == ["b"]
    assert dropped[0].impact.mid < settings.MIN_PITEM_IMPACT_SCORE <= kept[0].impact.mid


# ---- GEMM on the Qwen H100 trace --------------------------------------------------------------


def test_gemm_near_roofline_is_called_fine_and_claims_nothing(results) -> None:
    """On the MI300X roofline the H100 Qwen GEMMs run at 82-95 %: above the attainable 80 %."""
    _, result = results[(QWEN_H100, "gemm")]
    assert result.status == "OK" and result.findings == []
    near = result.metrics["near_roofline"]
    assert near["op_count"] == 4 and near["efficiency_min_percent"] >= settings.ATTAINABLE_ROOFLINE_PERCENT
    assert "near the attainable 80 %" in near["sentence"] and "claim no recoverable time" in near["sentence"]


def test_gemm_on_qwen_h100_ranks_quantified_findings(db) -> None:
    ctx = context_for(db, QWEN_H100, platform="H100")  # its own roofline: 58-68 %, below the attainable share
    result = agent("gemm").analyze(db, ctx)
    assert result.status == "OK"
    assert result.findings, "Qwen spends a quarter of E2E in GEMMs below the attainable roofline share"
    scores = [f.impact_score for f in result.findings]
    assert scores == sorted(scores, reverse=True)
    for f in result.findings:
        assert f.estimate_method == "quantified"
        assert f.impact_score == pytest.approx(0.875 * f.impact_high)
        assert f.impact_low == pytest.approx(0.75 * f.impact_high)
        assert f.recoverable_ms == pytest.approx(f.impact_score * ctx.e2e_time_ms / 100)
        assert f.impact_score >= settings.MIN_PITEM_IMPACT_SCORE
    top = result.findings[0]
    assert "aten::mm" in top.title and "8944x1024" in top.title  # titled after its dominant op and shape
    # the high estimate is the sum of (1 - efficiency / attainable) x share over the members, straight
    # from op_perf; no member is at or above the attainable share (those claim nothing)
    keys = [m["signature_key"] for m in top.evidence["members"]]
    expected = db.execute(
        "select sum((1 - pct_roofline_mean / ?) * kernel_time_sum_us / 1000 / ? * 100) from op_perf "
        "where signature_key in (select unnest(?::varchar[])) and pct_roofline_mean < ?",
        [settings.ATTAINABLE_ROOFLINE_PERCENT, ctx.e2e_time_ms, keys, settings.ATTAINABLE_ROOFLINE_PERCENT],
    ).fetchone()[0]
    assert top.impact_high == pytest.approx(expected)
    assert top.confidence == "medium"  # perf-model estimate, lowered by the linked_gpu_time_share warning
    assert "linked_gpu_time_share" in " ".join(top.evidence["confidence_reasons"])


def test_every_card_lists_its_members_with_shapes(results) -> None:
    for (trace, name), (_, result) in results.items():
        for f in result.findings:
            members = f.evidence["members"]
            assert len(f.operations) == len(members) >= 1, (trace, name, f.title)
            for member in members:
                escaped = member["name"].replace("|", "\\|")
                assert f"`{escaped}`" in f.details, (trace, name, member["name"])


def test_gemm_on_a_clean_trace_has_high_confidence(results) -> None:
    _, result = results[(BERT_H100, "gemm")]
    assert result.findings
    assert {f.confidence for f in result.findings if f.estimate_method == "quantified"} == {"high"}


def test_anomalous_efficiency_gets_a_note_not_a_finding(db) -> None:
    """On the A100 roofline the H100 GEMMs exceed 110 % of 'roofline': a measurement anomaly."""
    ctx = context_for(db, QWEN_H100, platform="A100")
    result = agent("gemm").analyze(db, ctx)
    anomalous = [op for op in result.metrics["operations"] if (op["efficiency_percent"] or 0) > settings.EFFICIENCY_ANOMALY_PERCENT]
    assert anomalous
    covered = {m["signature_key"] for f in result.findings for m in f.evidence["members"]}
    assert not covered & {op["signature_key"] for op in anomalous}
    assert sum("anomaly" in note for note in result.metrics["notes"]) == len(anomalous)


def test_fusion_flagged_ops_get_no_finding(db) -> None:
    plain = agent("gemm").analyze(db, context_for(db, QWEN_H100, platform="H100"))
    assert any("aten::mm" == m["name"] for f in plain.findings for m in f.evidence["members"])
    ctx = context_for(db, QWEN_H100, platform="H100", fusion_flagged_ops={"aten::mm": "Qwen2MLP"})
    flagged = agent("gemm").analyze(db, ctx)
    assert not any(m["name"] == "aten::mm" for f in flagged.findings for m in f.evidence["members"])
    assert any("aten::mm" in note and "Qwen2MLP" in note for note in flagged.metrics["notes"])


# ---- ownership and re-labelling ---------------------------------------------------------------


def _owned(result: AgentResult) -> set[str]:
    return {op["signature_key"] for op in result.metrics.get("operations", []) if op.get("excluded") != compute.EAGER_ATTENTION_NOTE}


@pytest.mark.parametrize("trace", TRACES)
def test_generic_never_includes_an_op_the_gemm_agent_took(results, trace) -> None:
    gemm = _owned(results[(trace, "gemm")][1])
    generic = _owned(results[(trace, "generic")][1])
    assert not gemm & generic


@pytest.mark.parametrize("trace", TRACES)
def test_every_op_signature_belongs_to_exactly_one_agent(db, results, trace) -> None:
    ctx = results[(trace, "gemm")][0]
    # every op signature but the copies and fills (most kernel time in memcpy / memset kernels),
    # which belong to the transfer findings
    expected = {k for (k,) in db.execute(
        "select p.signature_key from op_perf as p where p.trace_id = ? and p.platform = ? and coalesce(("
        "  select sum(k.dur_us) filter (where k.kernel_category in ('memcpy', 'memset')) / sum(k.dur_us)"
        "  from op_perf_kernels as k where k.trace_id = p.trace_id and k.platform = p.platform"
        "  and k.signature_key = p.signature_key), 0) <= 0.5", [ctx.trace_id, ctx.platform]
    ).fetchall()}
    seen: list[str] = []
    for name in AGENTS:
        seen += _owned(results[(trace, name)][1])
    assert len(seen) == len(set(seen)), "an op is analyzed by two agents"
    assert set(seen) == expected


def test_other_ops_running_gemm_and_attention_kernels_are_relabelled(db, results) -> None:
    _, gemm = results[(VLLM_GRAPH, "gemm")]
    _, sdpa = results[(VLLM_GRAPH, "sdpa")]
    _, moe = results[(VLLM_GRAPH, "moe")]
    _, triton = results[(VLLM_GRAPH, "triton")]
    _, generic = results[(VLLM_GRAPH, "generic")]
    relabelled_gemm = {op["name"] for op in gemm.metrics["relabelled_ops"]}
    relabelled_sdpa = {op["name"] for op in sdpa.metrics["relabelled_ops"]}
    relabelled_moe = {op["name"] for op in moe.metrics["relabelled_ops"]}
    relabelled_triton = {op["name"] for op in triton.metrics["relabelled_ops"]}
    assert relabelled_gemm and relabelled_sdpa and relabelled_moe and relabelled_triton
    assert all(op["from_category"] == "other" and op["kernel_share_percent"] > 50 for op in gemm.metrics["relabelled_ops"])
    assert any("re-labelled" in f.insight for f in gemm.findings)
    generic_names = {op["name"] for op in generic.metrics["operations"]}
    relabelled = relabelled_gemm | relabelled_sdpa | relabelled_moe | relabelled_triton
    assert not generic_names & relabelled
    assert generic.metrics["category_specific"]["relabelled_away_count"] == len(relabelled)


def test_communication_ops_are_left_to_the_system_agents(results) -> None:
    _, generic = results[(B200_EAGER, "generic")]
    skipped = generic.metrics["category_specific"]["communication_ops_skipped"]
    assert skipped == ["symm_mem::multimem_all_reduce_"]
    assert not any(m["name"] in skipped for f in generic.findings for m in f.evidence["members"])


def test_eager_attention_is_found_from_shapes() -> None:
    def op(key: str, name: str, category: str, dims: str) -> OpRecord:
        return _op(signature_key=key, name=name, op_category=category, input_dims=dims)

    ops = [
        op("qk", "aten::bmm", "GEMM", "[[32,128,64],[32,64,128]]"),
        op("sm", "aten::_softmax", "reduce", "[[2,16,128,128],[],[]]"),
        op("pv", "aten::bmm", "GEMM", "[[32,128,128],[32,128,64]]"),
        op("mlp", "aten::bmm", "GEMM", "[[32,128,64],[32,64,256]]"),
    ]
    roles = compute.find_eager_attention(ops)
    assert set(roles) == {"qk", "sm", "pv"}
    assert compute.find_eager_attention([o for o in ops if o.signature_key != "sm"]) == {}


def test_agents_without_their_ops_report_no_data(results) -> None:
    # the moe agent has ops where a serving engine's MoE op runs (vllm::moe_forward: MoE_fused in the
    # op_categories seed) and where `other` ops run mostly MoE kernels (the graph replay without its
    # capture traces: re-labelled)
    with_moe = {B200_EAGER, VLLM_GRAPH}
    for trace in TRACES:
        _, moe = results[(trace, "moe")]
        if trace == B200_EAGER:
            assert moe.status == "OK" and moe.metrics["op_count"] > 0 and not moe.metrics["relabelled_ops"]
        elif trace in with_moe:
            assert moe.status == "OK" and moe.metrics["relabelled_ops"]
        else:
            assert moe.status == "NO_DATA" and not moe.findings
    _, conv = results[(RESNET, "convolution")]
    assert conv.status == "OK"
    facts = conv.metrics["category_specific"]
    assert facts["channels_first_count"] == conv.metrics["op_count"]
    assert 0 < facts["transpose_overhead_percent"] < 100


# ---- evidence SQL and rendering ---------------------------------------------------------------


def test_every_findings_evidence_sql_runs_and_reproduces_its_impact(db, results) -> None:
    checked = 0
    for (trace, name), (_, result) in results.items():
        for f in result.findings:
            cursor = db.execute(f.evidence_sql)
            columns = [d[0] for d in cursor.description]
            rows = [dict(zip(columns, r)) for r in cursor.fetchall()]
            assert rows, (trace, name, f.finding_id)
            assert len(rows) == len(f.evidence["members"])
            if f.evidence["group"]["family"] != "eager":
                assert sum(r["impact_mid"] for r in rows) == pytest.approx(f.impact_score), (trace, name, f.finding_id)
                assert sum(r["impact_high"] for r in rows) == pytest.approx(f.impact_high)
            checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", AGENTS)
def test_each_agent_runs_on_every_trace_and_renders(results, name) -> None:
    statuses = set()
    for trace in TRACES:
        ctx, result = results[(trace, name)]
        assert result.status in ("OK", "NO_DATA"), (trace, result.error)
        assert result.agent == name and result.tier == "compute"
        statuses.add(result.status)
        markdown = render_findings(by_name(name), result, ctx)
        assert "{{" not in markdown and "{%" not in markdown
        assert markdown.startswith("# ") and "**Status**: " + result.status in markdown
        for rank, f in enumerate(result.findings, start=1):
            assert f"### Compute P{rank}: {f.title}" in markdown
            assert f.finding_id.startswith(f"{name}:")
        if result.status == "OK":
            assert "## Detailed Analysis" in markdown and "| Operation | Shape | Count | Time (ms) | % E2E | % Roofline | Bound |" in markdown
            if not result.findings:
                assert "No findings" in markdown
        else:
            assert "No " in markdown and not result.findings
    assert "OK" in statuses or name == "moe"


def test_template_renders_with_only_result_and_ctx(results) -> None:
    """The shared template needs nothing but `result` and `ctx` (ERROR results carry no metrics)."""
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    template = environment.get_template("compute.md.j2")
    ctx, result = results[(RESNET, "convolution")]
    assert "### Compute P1:" in template.render(result=result, ctx=ctx)
    error = AgentResult(agent="gemm", tier="compute", category="gemm", status="ERROR", error="boom")
    text = template.render(result=error, ctx=ctx)
    assert "Status: ERROR" in text and "boom" in text


CATEGORY_MARTS = {"gemm_ops": "gemm", "sdpa_ops": "sdpa", "elementwise_ops": "elementwise", "reduce_ops": "reduce",
                  "norm_ops": "norm", "conv_ops": "convolution"}


def test_one_seed_says_which_agent_owns_which_category(db) -> None:
    """agent_categories is the one mapping: each op category has one owner, every owner is a
    registered compute agent, and the per-category marts hold exactly their agent's op rows."""
    owners = load_agent_categories(db)
    registered = {d.name for d in COMPUTE_AGENTS}
    assert set(owners.op_categories) <= registered
    # kernel categories of a system-tier agent (copies and fills: the transfer findings) keep their
    # ops out of every compute agent
    assert set(owners.kernel_agents.values()) - registered == {"multi_kernel"}
    assert owners.system_kernel_categories == {"memcpy", "memset"}
    owned = [c for cats in owners.op_categories.values() for c in cats]
    assert len(owned) == len(set(owned)), "two agents claim one op category"
    assert "generic" not in owners.op_categories  # the generic agent takes the rest
    # SPEC §5 re-labels GEMM and attention; MoE and Triton kernels too (an `other` MoE op is
    # analyzed as MoE, a replayed Inductor kernel as compiler-generated)
    assert set(owners.relabel_agents.values()) == {"gemm", "sdpa", "moe", "triton"}
    for name in AGENTS:
        module = agent(name)
        assert module.AGENT_NAME == name and module.TIER == "compute"
    for mart, owner in CATEGORY_MARTS.items():
        mart_rows = db.execute(f"select count(*) from {mart}").fetchone()[0]
        expected = db.execute("select count(*) from op_perf where is_trace_platform and list_contains(?, op_category)",
                              [list(owners.owned_by(owner))]).fetchone()[0]
        assert mart_rows == expected, mart


def test_eager_attention_is_owned_by_sdpa_and_left_out_of_gemm_and_reduce(db, monkeypatch) -> None:
    """Pretend Qwen's rotary bmm and RMSNorm mean formed eager attention: the sdpa agent takes
    them as one fused-attention finding, the gemm and reduce agents note and skip them."""
    def fake_find(ops):
        return {op.signature_key: "pretend" for op in ops if op.name in ("aten::bmm", "aten::mean")}

    monkeypatch.setattr(compute, "find_eager_attention", fake_find)  # what the sdpa agent calls
    monkeypatch.setattr(compute_advice, "find_eager_attention", fake_find)  # ... and eager_attention_ops
    ctx = context_for(db, QWEN_H100)
    sdpa_result = agent("sdpa").analyze(db, ctx)
    eager = [f for f in sdpa_result.findings if f.evidence["group"]["family"] == "eager"]
    assert len(eager) == 1 and eager[0].title.startswith("Eager attention")
    assert "scaled_dot_product_attention" in eager[0].action
    assert {m["name"] for m in eager[0].evidence["members"]} == {"aten::bmm", "aten::mean"}
    cursor = db.execute(eager[0].evidence_sql)
    columns = [d[0] for d in cursor.description]
    rows = [dict(zip(columns, r)) for r in cursor.fetchall()]
    assert len(rows) == 2
    assert rows[0]["chain_impact_mid"] == pytest.approx(eager[0].impact_score)
    assert rows[0]["chain_impact_high"] == pytest.approx(eager[0].impact_high)
    for name, op_name in (("gemm", "aten::bmm"), ("reduce", "aten::mean")):
        result = agent(name).analyze(db, ctx)
        assert not any(m["name"] == op_name for f in result.findings for m in f.evidence["members"])
        excluded = [op for op in result.metrics["operations"] if op["name"] == op_name]
        assert excluded and all(op["excluded"] == compute.EAGER_ATTENTION_NOTE for op in excluded)
