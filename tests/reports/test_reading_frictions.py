"""Issue 28, friction 10, on real reports: analysis.md reads without contradicting itself.

- the plot is a file beside analysis.md, linked: no line of the markdown is a 100,594-character base64 run;
- the Executive Summary's table is of the window its caption says the impacts are a % of (SGLang decode:
  the table said 473.75 ms / 97.9 % idle beside "impacts are % of the 10.455 ms window");
- each section holds the cards of its own kind (the compute section held the system ones too);
- the quality check's GPU share (6.23 % on BERT-small H100) names a span other than the GPU timeline's
  (7.9 % busy), so the two numbers no longer read as one figure measured twice.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli

SGLANG = TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz"
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
# The longest line a real report holds is a Kernel Names appendix row, ~1,000 characters (kernel names are
# shortened to core.kernel_names' cap); the inline plot was one line of 100,594.
MAX_LINE_CHARS = 2_000
SECTION_OF_KIND = {"compute": "Compute Kernel Optimizations", "fusion": "Kernel Fusion Opportunities (Experimental)",
                   "system": "System-Level Optimizations"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reading")
    outs = {}
    for name, trace in (("sglang", SGLANG), ("bert", BERT)):
        out = root / name
        done = run_cli("analyze", str(trace), "--warehouse", str(root / "wh"), "--out", str(out), "--quiet")
        assert done.returncode == 0, done.stderr
        outs[name] = out
    return outs


def _section(markdown: str, name: str) -> str:
    return markdown.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]


def test_the_plot_is_linked_beside_the_report_and_no_line_is_huge(reports: dict[str, Path]) -> None:
    for out in reports.values():
        markdown = (out / "analysis.md").read_text()
        assert "![Performance improvement](perf_improvement.png)" in markdown
        assert (out / "perf_improvement.png").read_bytes().startswith(b"\x89PNG")
        assert "base64" not in markdown
        longest = max(markdown.splitlines(), key=len)
        assert len(longest) <= MAX_LINE_CHARS, longest[:200]


def test_the_summary_table_is_of_the_window_its_caption_names(reports: dict[str, Path]) -> None:
    out = reports["sglang"]
    markdown = (out / "analysis.md").read_text()
    summary = _section(markdown, "Executive Summary")
    e2e_ms = json.loads((out / "priority_data.json").read_text())["e2e_time_ms"]
    caption = re.search(r"every impact below is a % of the ([\d.]+) ms analysis window", summary)
    assert caption is not None and float(caption.group(1)) == pytest.approx(e2e_ms, abs=5e-4)
    table = dict(re.findall(r"^\| (Total Time|Compute %|Idle %) \| ([\d.]+)", summary, re.MULTILINE))
    assert float(table["Total Time"]) == pytest.approx(e2e_ms, abs=5e-4)  # 10.455 ms, not the 473.750 ms trace
    assert f"The table is of the {caption.group(1)} ms analysis window (E2E)" in summary
    # the decode step keeps the GPU 93.5 % busy (the Phases table): the window is mostly compute, not 97.9 % idle
    assert float(table["Compute %"]) > 80.0 and float(table["Idle %"]) < 10.0
    assert "spans 473.750 ms of GPU time" in summary  # the whole trace, window edges included, in the sentence


def test_each_section_holds_only_its_own_kind_of_card(reports: dict[str, Path]) -> None:
    from tracelake.analyzers.contracts import PriorityData
    from tracelake.reports.analysis_cards import finding_kind

    for out in reports.values():
        markdown = (out / "analysis.md").read_text()
        priority = PriorityData.model_validate_json((out / "priority_data.json").read_text())
        for kind, section in SECTION_OF_KIND.items():
            cards = [int(r) for r in re.findall(r"^### P(\d+): ", _section(markdown, section), re.MULTILINE)]
            assert cards == [f.global_rank for f in priority.findings if finding_kind(f) == kind], (out.name, section)
    sglang = PriorityData.model_validate_json((reports["sglang"] / "priority_data.json").read_text())
    assert {finding_kind(f) for f in sglang.findings} >= {"compute", "system"}  # both kinds, so the split is seen


def test_the_quality_checks_gpu_share_names_its_span_apart_from_the_timelines(reports: dict[str, Path]) -> None:
    quality = json.loads((reports["bert"] / "metadata" / "trace_quality.json").read_text())
    busy = next(c for c in quality["checks"] if c["check_name"] == "gpu_busy_share")
    markdown = (reports["bert"] / "analysis.md").read_text()
    timeline_busy = 100.0 - float(re.search(r"^\| Idle % \| ([\d.]+)%", markdown, re.MULTILINE).group(1))
    assert abs(100.0 * busy["value"] - timeline_busy) > 1.0  # two measures (6.23 % and 7.9 %) ...
    assert "of the whole trace span (first to last event, host events included" in busy["detail"]  # ... named apart
    assert "the GPU timeline's busy share is of its own span, first to last GPU event" in busy["detail"]
    assert "GPU busy " not in busy["detail"]
