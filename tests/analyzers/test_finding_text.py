"""Advice as data (analyzers/advice/*.toml) and its one renderer (analyzers/finding_text.py): every
row parses, a sentence comes out as the analyzers always wrote it, a missing value or fact is an
error, and the analyzers name only facts their table holds."""

from __future__ import annotations

import importlib

import jinja2
import pytest

from tests.analyzers.test_compute_analyzers import AGENTS, BERT_H100, QWEN_H100, RESNET, TRACES, context_for
from tracelake.analyzers import compute, finding_text
from tracelake.analyzers.contracts import AdviceText
from tracelake.analyzers.finding_text import advice_templates, render_advice, render_part


def test_every_row_of_every_table_parses() -> None:
    templates = advice_templates()
    assert {name.split(".")[0] for name in templates} >= set(AGENTS) | {"coverage"}
    environment = jinja2.Environment()
    for name, source in templates.items():
        environment.parse(source, name=name)  # raises on a broken template


def test_a_fact_renders_its_four_parts_with_clauses_and_formats() -> None:
    text = AdviceText(agent="gemm", fact="tiny_m", values={"small_count": 3, "example_shape": "M=1 N=4096 K=4096",
                                                           "many_calls": True, "token_batch": True})
    advice = render_advice(text)
    assert advice.insight == ("3 of these GEMMs have M or N of at most 16 (e.g. M=1 N=4096 K=4096): they are "
                              "matrix-vector-like and read the whole weight matrix for a few rows.")
    assert advice.action == ("Batch more requests or tokens into each GEMM so M grows or merge the many small calls into "
                             "one batched / grouped GEMM, and fuse the surrounding elementwise work into the GEMM epilogue.")
    few = render_advice(text.model_copy(update={"values": {**text.values, "many_calls": False}}))
    assert few.action.startswith("Batch more requests or tokens into each GEMM so M grows, and fuse")
    # M=1 outside a serving step (a diffusion modulation GEMM) is no token batch: no batching advice
    modulation = render_advice(text.model_copy(update={"values": {**text.values, "token_batch": False}}))
    assert modulation.action.startswith("M is not a token batch here") and "Batch more" not in modulation.action


def test_trace_strings_are_printed_as_they_are() -> None:
    """No escaping at this point: the finding's JSON holds the raw text, the markdown outputs escape it."""
    reason = render_part(AdviceText(agent="coverage", fact="fusion_candidate",
                                    values={"candidate": "aten::add_ <x> | *y*"}), "reason")
    assert reason == "covered by the fusion candidate `aten::add_ <x> | *y*`"


def test_a_part_the_row_leaves_out_is_empty() -> None:
    advice = render_advice(AdviceText(agent="moe", fact="unmodelled", values={
        "memory_bound": False, "generic": compute.Advice(insight="", action="a", reasoning="r", resolution="s")}))
    assert (advice.insight, advice.action, advice.reasoning, advice.resolution) == ("", "a", "r", "s")
    assert render_part(AdviceText(agent="sdpa", fact="eager"), "details") == ""


def test_a_missing_value_or_fact_is_an_error() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render_advice(AdviceText(agent="gemm", fact="tiny_m", values={"small_count": 3}))
    with pytest.raises(KeyError, match="no advice row `no_such_fact`"):
        render_advice(AdviceText(agent="gemm", fact="no_such_fact"))


@pytest.mark.parametrize("trace", [QWEN_H100, BERT_H100, RESNET])
def test_the_analyzers_name_facts_their_table_holds(db, trace: str) -> None:
    """Every group each compute agent forms on the trace maps to a row of its table, and the
    finding's action is that row rendered."""
    assert trace in TRACES
    rows = {name.rsplit(".", 1)[0] for name in advice_templates()}
    ctx = context_for(db, trace)
    for name in AGENTS:
        module = importlib.import_module(f"tracelake.analyzers.{name}")
        result = module.analyze(db, ctx)
        peaks, peak_hbm = compute.load_platform_peaks(db, ctx.platform)
        ops, handed_off = compute.load_agent_ops(db, ctx, module.AGENT)
        data = compute.AgentData(ctx=ctx, ops=ops, platform_peaks=peaks, peak_hbm_tb_per_s=peak_hbm,
                                 handed_off=handed_off)
        for op in ops:
            op.kind = module.AGENT.classify(op)
        kept, dropped = compute.group_ops(ops, module.AGENT.family or (lambda op: op.kind), False)
        for group in kept + dropped:
            text = module.advice_text(group, data)
            assert f"{text.agent}.{text.fact}" in rows, (name, text.fact)
            assert finding_text.render_advice(text) == module.advise(group, data)
        assert all(f.action for f in result.findings), name
