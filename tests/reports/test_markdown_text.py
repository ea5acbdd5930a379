"""core.markdown_text: a trace string reads as itself on a CommonMark/GFM renderer, wherever it
lands (prose, heading, list item, table cell, code span, code block, SQL), and never as markup."""

from __future__ import annotations

import duckdb
import pytest

from tests.reports.markdown_checks import RENDERER, markup_problems, raw_html, tables, tokens, visible_text
from tests.reports.test_analysis_md import GPU, _finding, _inputs, _priority
from tracelake.agents.registry import by_name
from tracelake.agents.render import render_findings
from tracelake.analyzers.contracts import AgentResult, AnalysisContext
from tracelake.core.markdown_text import TraceStrings, code, code_cell, fenced, one_line, safe_markdown, sql_literal, text
from tracelake.reports.analysis_md import embed_plot, render_analysis, validate_analysis
from tracelake.reports.plot import perf_improvement_png
from tracelake.reports.plot_process import PNG_SIGNATURE
from tracelake.reports.report_inputs import PLOT_PENDING

HOSTILE = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<IMG SRC=x>", "a|b\nc", "a\\|b", "x`y``z",
    "`lead", "trail`", "$\\frac{1}{2}$", "**bold**", "*i* and __u__", "_em_ foo_", "snake_case_name_",
    "[link](http://x)", "![img](http://y)", "[x]: http://ref", "[ ] task", "{{ 1 }}", "{% if x %}", "{{{ x }}}",
    "<c10::BFloat16>", "<http://x>", "<me@x.org>", "<!-- c -->", "<?php ?>", "&amp; &#60; &lt;", "# heading",
    "###### h6", "- item", "+ item", "1. one", "2) two", "> quote", "---", "===", "~~strike~~", "~x~",
    "\\*not emphasis", "trailing \\", "TODO nan NaN inf None P12", "<Model>", "<placeholder>", "x\x00y\x07z",
    "tracelake-plot-pending", "void k<float>(float*, c10::Half*)", "aten::_foo [1x2]", "very_long" * 1200,
]
IDS = [repr(s[:24]) for s in HOSTILE]


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_text_reads_literally_in_every_context(name: str) -> None:
    shown = one_line(name)
    for context in ("Before {} after.", "### P1: {}", "- {}", "> {}", "{}", "*Finding: {} here.*", "**{}**: x",
                    "1. {}"):
        markdown = context.format(text(name))
        assert raw_html(markdown) == [] and markup_problems(markdown) == [], (context, markdown)
        assert visible_text(markdown) == " ".join(visible_text(context.format("@@")).replace("@@", shown).split()), \
            (context, markdown)
    table = tables(f"| a | b |\n|---|---|\n| {text(name)} | x |\n| y | {text(name)} |")
    assert table == [[["a", "b"], [shown, "x"], ["y", shown]]]


@pytest.mark.parametrize("name", HOSTILE, ids=IDS)
def test_code_spans_hold_any_name(name: str) -> None:
    shown = one_line(name)
    spans = [t for t in tokens(f"The op {code(name)} takes 3 ms.") if t.type == "code_inline"]
    assert [s.content for s in spans] == [shown]
    table = tables(f"| op | ms |\n|---|---|\n| {code_cell(name)} | 3 |")
    assert table == [[["op", "ms"], [shown, "3"]]]


def test_fenced_blocks_cannot_be_closed_by_their_content() -> None:
    for body in ("select 1", "select '```' as x\n```\n# not a heading", "````sql\n``````", "~~~\nx"):
        markdown = f"{fenced(body, 'sql')}\n\nafter"
        found = [t for t in tokens(markdown) if t.type == "fence"]
        assert [(t.info, t.content) for t in found] == [("sql", body + "\n")]
        assert visible_text(markdown).endswith("after")


def test_sql_literals_round_trip() -> None:
    with duckdb.connect() as db:
        for name in ["it's", "''", "a\\b", "a\nb", *HOSTILE[:8]]:
            assert db.execute(f"select {sql_literal(name)}").fetchone()[0] == name


def test_analyzer_markdown_keeps_its_format_and_shows_names_literally() -> None:
    names = ["<script>alert(1)</script>", "a|b\nc", "x`y``z", "**bold**", "[link](http://x)",
             "L" * 40 + "<b>" + "x" * 80]
    trace_strings = TraceStrings.of({"top_operations": [{"name": n} for n in names]})
    clipped = names[-1][:57] + "..."
    written = (  # as the analyzers write it: names in backticks or bare, `|` escaped in tables, clipped
        f"**Identification:** the op `{names[0]}` (4 calls), e.g. {names[3]} and {names[4]}, led by `{clipped}`.\n\n"
        "| Operation | Count |\n|---|---:|\n"
        + "".join(f"| `{n.replace('|', chr(92) + '|')}` | 1 |\n" for n in names))
    markdown = trace_strings.escape_in(written)
    assert markup_problems(markdown) == []
    assert [t.content for t in tokens(markdown) if t.type == "code_inline"][:2] == [names[0], clipped]
    assert "<strong>Identification:</strong>" in RENDERER.render(markdown)
    assert f"e.g. {names[3]} and {names[4]}, led by" in visible_text(markdown)
    assert tables(markdown)[0][1:] == [[one_line(n), "1"] for n in names]
    # two names of one sentence do not pair into emphasis either
    pair = TraceStrings(["aten::_to_copy", "aten::copy_"]).escape_in("ops aten::_to_copy and aten::copy_ take 3 ms")
    assert "<em>" not in RENDERER.render(pair) and visible_text(pair) == "ops aten::_to_copy and aten::copy_ take 3 ms"


def test_safe_markdown_neutralizes_html_links_and_open_fences() -> None:
    written = ("x <b onclick=y>bold</b> `<kept>` [a](http://x) ![i](y) $m$ {{ t }} <http://z> stray ` tick\n\n"
               "```\ncode <i> stays\n")
    markdown = safe_markdown(written)
    assert raw_html(markdown) == []
    rendered = RENDERER.render(markdown)
    assert "<a " not in rendered and "<img" not in rendered and "<code>&lt;kept&gt;</code>" in rendered
    assert [t.content for t in tokens(markdown + "\n\nafter") if t.type == "fence"] == ["code <i> stays\n"]
    ours = f"{text(HOSTILE[0])} {code(HOSTILE[5])} {text('a|b')}\n\n| {code_cell('a|b')} |\n|---|"
    assert safe_markdown(ours) == ours  # what the helpers wrote is left alone


def test_a_report_full_of_hostile_names_is_valid() -> None:
    findings = [_finding("generic", "compute", title, 1.0, 2.0, 3.0) for title in HOSTILE[:12]]
    findings.append(_finding("gemm", "compute", "title " + PLOT_PENDING, 1.0, 1.5, 2.0))
    operations = [{"name": name, "category": "other", "count": 1, "time_ms": 0.5, "percent_of_e2e": 4.0,
                   "pct_roofline": None, "bound": None} for name in HOSTILE[-12:]]
    inputs = _inputs(findings, top_operations=operations, trace_name="<img src=f>|`x`.json.gz",
                     warnings=["device <script>x</script> {{ y }} TODO"], plot_png_base64=PLOT_PENDING,
                     skipped_steps=["**skip** <b>"])
    markdown = embed_plot(render_analysis(inputs))
    assert validate_analysis(markdown, inputs.priority) == []
    assert markup_problems(markdown) == []
    seen = visible_text(markdown)
    for name in [*HOSTILE[:12], "<img src=f>|`x`.json.gz", "device <script>x</script> {{ y }} TODO"]:
        assert one_line(name) in seen, name


def test_findings_templates_escape_what_they_print() -> None:
    names = HOSTILE[:10]
    finding = _finding("generic", "compute", names[0], 1.0, 2.0, 3.0).model_copy(update={
        "insight": f"The op `{names[1]}` leads.", "details": f"**Data:**\n\n| Op |\n|---|\n| `{names[2]}` |",
        "evidence_sql": f"select * from op_perf where name = {sql_literal(names[5])}"})
    metrics = {"display_name": "Other ops", "total_time_ms": 1.0, "e2e_time_ms": 12.5, "percent_of_e2e": 8.0,
               "op_count": len(names), "call_count": 10, "modeled_op_count": 0, "platform": "H100",
               "categories_present": {"<i>cat</i>": 1.0}, "notes": [f"`{names[3]}` is left out"],
               "category_specific": {"dominant_library": names[4]}, "relabelled_ops": [],
               "top_operations": [{"name": n, "args": n, "count": 1, "time_ms": 0.1, "percent_of_e2e": 1.0,
                                   "efficiency_percent": None, "bound": None, "relabelled_from": None} for n in names]}
    result = AgentResult(agent="generic", tier="compute", category="generic", status="OK", metrics=metrics,
                         findings=[finding])
    ctx = AnalysisContext(trace_id="abc", platform="H100", e2e_time_ms=12.5, computation_time_ms=9.0)
    markdown = render_findings(by_name("generic"), result, ctx)
    assert markup_problems(markdown) == []
    seen = visible_text(markdown)
    for name in names:
        assert one_line(name) in seen, name
    assert [t.content for t in tokens(markdown) if t.type == "fence"] == [finding.evidence_sql + "\n"]


def test_the_plot_draws_names_as_plain_text() -> None:
    titles = ["$\\frac{1}{2}$", "$\\notamacro$ and $", "a\x00b\nc", "x" * 10000, "<script>", "\\\\", "$$"]
    priority = _priority([_finding("gemm", "compute", t, 1.0, 2.0, 3.0) for t in titles])
    assert perf_improvement_png(priority, GPU).startswith(PNG_SIGNATURE)
