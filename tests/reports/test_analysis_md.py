"""analysis.md: rendered from hand-built inputs, validated, and broken on purpose."""

from __future__ import annotations

import base64
import re

import pytest

from tests.conftest import trace_id_of
from tracelake.analyzers.contracts import AgentResult, CategoryPriority, Finding, PriorityData, RankedFinding
from tracelake.analyzers.model_id import ModelInfo, identify_model
from tracelake.core.kernel_names import KERNEL_NAME_MAX_CHARS, short_kernel_name
from tracelake.reports.analysis_md import SECTIONS, render_analysis, validate_analysis
from tracelake.reports.plot import perf_improvement_png
from tracelake.reports.plot_process import PNG_SIGNATURE, PlotProcess
from tracelake.reports.report_inputs import ReportInputs

GPU = {
    "total_time_ms": 12.5, "computation_time_ms": 9.0, "exposed_comm_time_ms": 0.5, "exposed_memcpy_time_ms": 0.25,
    "busy_time_ms": 9.75, "idle_time_ms": 2.75, "computation_time_percent": 72.0, "exposed_comm_time_percent": 4.0,
    "exposed_memcpy_time_percent": 2.0, "idle_time_percent": 22.0,
}


def _finding(agent: str, tier: str, title: str, low: float | None, mid: float | None, high: float | None,
             method: str = "quantified", details: str = "") -> Finding:
    return Finding(
        finding_id=f"{agent}:{title[:12]}", agent=agent, tier=tier, category=agent, title=title,
        insight=f"{title}: the numbers the {agent} agent measured.", action=f"Do the {agent} fix.",
        impact_low=low, impact_score=mid, impact_high=high,
        recoverable_ms=None if mid is None else mid * GPU["total_time_ms"] / 100.0,
        estimate_method=method, confidence="high" if method == "quantified" else "medium",
        evidence={"time_ms": 4.25, "efficiency_percent": 41.5, "calls": 96, "shapes": ["8944x1024", "1024x2816"]},
        evidence_sql=f"select * from op_perf where trace_id = 'abc' -- {agent}",
        operations=["aten::mm", "aten::addmm"], details=details)


@pytest.fixture
def findings() -> list[Finding]:
    return [
        _finding("gemm", "compute", "BF16 GEMMs at 60% of roofline", 12.0, 14.0, 16.0),
        _finding("cpu_idle", "system", "Launch-bound: short kernels between host gaps", 5.0, 10.0, 15.0, "heuristic",
                 details="**Identification:** gaps.\n\n## Data\n\n**Reasoning:** launches.\n\n**Resolution:** graphs."),
        _finding("kernel_fusion", "system", "Unfused RMSNorm chain", 2.0, 2.5, 3.0),
        _finding("multi_kernel", "system", "Host-to-device copies", None, None, None, "qualitative"),
    ]


def _priority(findings: list[Finding], scope: str = "standalone") -> PriorityData:
    return PriorityData(
        trace_id="abc", comparison_scope=scope, e2e_time_ms=GPU["total_time_ms"],
        findings=[RankedFinding(**f.model_dump(), global_rank=rank) for rank, f in enumerate(findings, start=1)],
        priorities=[CategoryPriority(category="gemm", tier="compute", impact_score=14.0, finding_count=1)])


def _inputs(findings: list[Finding], **changes) -> ReportInputs:
    priority = _priority(findings, changes.pop("scope", "standalone"))
    values = {
        "title_model": "Qwen1.5-0.5B", "platform": "H100", "mode": "default", "mode_reason": "no serving engine seen",
        "trace_name": "qwen.json.gz", "trace_id": "abc", "gpu_utilization": GPU, "top_bottleneck_category": "GEMM",
        "priority": priority,
        "agent_results": [AgentResult(agent=f.agent, tier=f.tier, category=f.category, status="OK", findings=[f],
                                      attempts=1) for f in findings],
        "top_operations": [
            {"name": "aten::mm", "category": "GEMM", "count": 48, "time_ms": 4.055, "percent_of_e2e": 32.44,
             "pct_roofline": 61.7, "bound": "COMPUTE_BOUND"},
            {"name": "aten::cat", "category": "other", "count": 48, "time_ms": 2.014, "percent_of_e2e": 16.1,
             "pct_roofline": None, "bound": None},
        ],
        "model_info": ModelInfo(model_family="Qwen", model_name="Qwen1.5-0.5B", architecture="Decoder-only Transformer",
                                scale="~0.46B parameters", precision="BF16", evidence=["24 `Qwen2DecoderLayer`"],
                                confidence="high"),
        "platform_spec": {"platform": "H100", "display_name": "NVIDIA H100 SXM", "kind": "vendor_peak",
                          "source": "NVIDIA H100 datasheet", "mem_bw_gbps": 3350.0, "memory_gb": 80.0,
                          "peaks_tflops": {"matrix_bf16": 989.0, "matrix_fp8": 1979.0}},
        "quality_checks": [{"check_name": "parses", "value": 1.0, "threshold": 1.0, "verdict": "pass",
                            "detail": "file parsed"}],
        "warnings": [], "skipped_steps": [],
        "reproduce_sql": [("GPU time breakdown", "select * from gpu_timeline where trace_id = 'abc'")],
        "plot_png_base64": base64.b64encode(perf_improvement_png(priority, GPU)).decode(),
    }
    values.update(changes)
    return ReportInputs(**values)


def _sections(markdown: str) -> list[str]:
    return re.findall(r"^## (.+)$", re.sub(r"```.*?```", "", markdown, flags=re.DOTALL), re.MULTILINE)


def test_renders_every_section_in_order(findings):
    inputs = _inputs(findings)
    markdown = render_analysis(inputs)
    assert markdown.splitlines()[0] == "# Qwen1.5-0.5B - H100 Standalone Analysis"
    assert _sections(markdown) == [s for s in SECTIONS if s != "Warnings"]
    assert validate_analysis(markdown, inputs.priority) == []
    for placeholder in ("{{", "{%", "TODO", "<placeholder>", "None %", "nan"):
        assert placeholder not in markdown


def test_metric_table_and_plot(findings):
    markdown = render_analysis(_inputs(findings))
    summary = markdown.split("## Executive Summary")[1].split("\n## ")[0]
    assert "| Total Time | 12.500 ms |" in summary
    assert "| Compute % | 72.0% |" in summary
    assert "| Idle % | 22.0% |" in summary
    assert "| Exposed Communication % | 4.0% |" in summary
    assert "| Top Bottleneck Category | GEMM |" in summary
    assert "![Performance improvement](data:image/png;base64,iVBOR" in summary  # a PNG, base64-encoded


def test_each_section_holds_the_cards_of_its_own_kind(findings):
    """Issue 28: "Compute Kernel Optimizations" held every card, the system ones too. Each section now
    holds its own kind's cards, in rank order; the Executive Summary's table ranks them all."""
    markdown = render_analysis(_inputs(findings))
    compute = markdown.split("## Compute Kernel Optimizations")[1].split("\n## ")[0]
    fusion = markdown.split("## Kernel Fusion Opportunities (Experimental)")[1].split("\n## ")[0]
    system = markdown.split("## System-Level Optimizations")[1].split("\n## ")[0]
    assert re.findall(r"^### P(\d+):", compute, re.MULTILINE) == ["1"]  # the GEMM
    assert re.findall(r"^### P(\d+):", fusion, re.MULTILINE) == ["3"]  # the RMSNorm chain
    assert re.findall(r"^### P(\d+):", system, re.MULTILINE) == ["2", "4"]  # launch-bound, copies
    ranked = markdown.split("**All findings, by recoverable time**")[1].split("\n\n")[1]
    assert re.findall(r"^\| P(\d+) \|", ranked, re.MULTILINE) == ["1", "2", "3", "4"]
    assert validate_analysis(markdown, _priority(findings)) == []
    card = compute.split("### P1: BF16 GEMMs at 60% of roofline")[1]
    assert "**Insight**: BF16 GEMMs at 60% of roofline: the numbers" in card
    assert "**Action**: Do the gemm fix." in card
    # 12-16 % of 12.5 ms = 1.500-2.000 ms, mid 14 % = 1.750 ms
    assert "**Impact**: 12.0–16.0% of E2E (1.500–2.000 ms; mid 14.0% ≈ 1.750 ms); estimate: quantified; " \
           "confidence: high" in card
    assert "not quantifiable from trace data" in system.split("### P4: Host-to-device copies")[1]
    assert "[how to reproduce P1](#sql-p1)" in card.split("### Top Operations")[0]
    assert "| 1 | `aten::mm` | GEMM | 48 | 4.055 | 32.4 | 61.7% | compute-bound |" in compute
    assert "| 2 | `aten::cat` | other | 48 | 2.014 | 16.1 | — | — |" in compute


def test_detailed_analysis_and_appendix(findings):
    markdown = render_analysis(_inputs(findings))
    detail = markdown.split("## Detailed Analysis")[1].split("\n## ")[0]
    assert [t for t in re.findall(r"^### (.+)$", detail, re.MULTILINE)] == [
        "BF16 GEMMs at 60% of roofline", "Launch-bound: short kernels between host gaps", "Unfused RMSNorm chain",
        "Host-to-device copies"]  # rank order
    gemm = detail.split("### BF16 GEMMs at 60% of roofline")[1].split("\n### ")[0]
    for label in ("**Identification**", "**Data**", "**Reasoning**", "**Resolution**", "**Impact estimate**"):
        assert label in gemm
    assert "| time ms | 4.250 ms |" in gemm and "| efficiency percent | 41.5% |" in gemm
    assert "| shapes | 8944x1024, 1024x2816 |" in gemm
    # an agent's own structured details are kept, with its headings demoted so they open no section
    idle = detail.split("### Launch-bound: short kernels between host gaps")[1].split("\n### ")[0]
    assert "**Identification:** gaps." in idle and "**Data**" in idle
    appendix = markdown.split("## Appendix")[1]
    assert "- **Model**: Qwen1.5-0.5B" in appendix and "- **Precision**: BF16" in appendix
    assert "NVIDIA H100 SXM" in appendix and "vendor datasheet peak" in appendix and "3.35 TB/s" in appendix
    assert "| matrix_bf16 | 989 |" in appendix
    assert "| parses | 1 | 1 | pass | file parsed |" in appendix
    assert "select * from op_perf where trace_id = 'abc' -- gemm" in appendix
    assert "select * from gpu_timeline where trace_id = 'abc'" in appendix


def test_warnings_only_when_there_are_warnings(findings):
    assert "## Warnings" not in render_analysis(_inputs(findings))
    warned = _inputs(findings, warnings=["the device name matches no known platform"])
    markdown = render_analysis(warned)
    assert _sections(markdown)[:3] == ["Executive Summary", "Warnings", "Compute Kernel Optimizations"]
    assert "- the device name matches no known platform" in markdown
    assert validate_analysis(markdown, warned.priority) == []


def test_skipped_steps_are_stated_at_the_top(findings):
    inputs = _inputs(findings, skipped_steps=["compute-kernel agents: no CPU ops in the trace (GPU-only)"])
    markdown = render_analysis(inputs)
    head = markdown.split("## Executive Summary")[0]
    assert "Fallback analysis" in head and "compute-kernel agents: no CPU ops in the trace (GPU-only)" in head
    assert "## Warnings" in markdown and "- Skipped: compute-kernel agents" in markdown
    assert validate_analysis(markdown, inputs.priority) == []


def test_failed_agent_is_reported(findings):
    failed = AgentResult(agent="sdpa", tier="compute", category="sdpa", status="ERROR", error="timed out", attempts=2)
    inputs = _inputs(findings)
    inputs = inputs.model_copy(update={"agent_results": [*inputs.agent_results, failed]})
    markdown = render_analysis(inputs)
    assert "## Warnings" in markdown and "agent sdpa (compute tier) failed: timed out" in markdown


def test_no_findings(findings):
    inputs = _inputs([])
    markdown = render_analysis(inputs)
    assert validate_analysis(markdown, inputs.priority) == []
    assert "No compute-kernel finding: no op group's estimated saving reaches the 0.5 % of E2E reporting floor" in markdown
    assert "No kernel fusion opportunities detected." in markdown
    assert "No system-level bottlenecks detected. GPU activity: 72.0% computation, 22.0% idle" in markdown
    assert not re.search(r"^### P\d+", markdown, re.MULTILINE)


def test_unknown_model_title_and_missing_numbers(findings):
    inputs = _inputs(findings, title_model="Cannot be inferred from trace", model_info=ModelInfo(),
                     gpu_utilization={**GPU, "exposed_comm_time_percent": float("nan"),
                                      "exposed_comm_time_ms": float("nan")}, plot_png_base64=None)
    markdown = render_analysis(inputs)
    assert markdown.startswith("# Workload - H100 Standalone Analysis\n")
    assert "| Exposed Communication % | — |" in markdown  # a missing number is a dash, never nan
    assert "The performance plot is not available" in markdown
    assert validate_analysis(markdown, inputs.priority) == []


def test_comparative_report(findings):
    inputs = _inputs(findings, scope="comparative", comparison_scope="comparative", platform="MI300X",
                     platform2="H100", gpu_utilization2={**GPU, "total_time_ms": 10.0, "computation_time_percent": 80.0,
                                                         "idle_time_percent": 14.0},
                     top_bottleneck_category2="GEMM", trace2_name="b.json.gz", trace2_id="def")
    markdown = render_analysis(inputs)
    assert markdown.splitlines()[0] == "# Qwen1.5-0.5B - Comparative Analysis: MI300X vs H100"
    assert "| Metric | Trace 1 (MI300X) | Trace 2 (H100) | Difference |" in markdown
    assert "| Total Time | 12.500 ms | 10.000 ms | -2.500 ms (-20.0%) |" in markdown
    assert "| Compute % | 72.0% | 80.0% | +8.0 pp |" in markdown
    assert "Trace 2 (H100) is 20.0% faster than trace 1 (MI300X)" in markdown
    assert validate_analysis(markdown, inputs.priority) == []
    # a standalone title over comparative priority data is flagged
    standalone = markdown.replace(markdown.splitlines()[0], "# Qwen1.5-0.5B - MI300X Standalone Analysis", 1)
    assert any("comparative" in p for p in validate_analysis(standalone, inputs.priority))


def test_validation_catches_mutations(findings):
    inputs = _inputs(findings)
    markdown = render_analysis(inputs)
    priority = inputs.priority

    removed = re.sub(r"## Kernel Fusion Opportunities \(Experimental\)\n", "", markdown)
    assert any("Kernel Fusion Opportunities (Experimental)' is missing" in p for p in validate_analysis(removed, priority))

    swapped = markdown.replace("## Detailed Analysis", "## Tmp").replace("## Appendix", "## Detailed Analysis") \
        .replace("## Tmp", "## Appendix")
    assert any("out of order" in p for p in validate_analysis(swapped, priority))

    renamed = markdown.replace("## Appendix", "## Appendices")
    problems = validate_analysis(renamed, priority)
    assert any("'## Appendix' is missing" in p for p in problems)
    assert any("unexpected section '## Appendices'" in p for p in problems)

    for placeholder, expected in (("{{ model }}", "'{{'"), ("{% if x %}", "'{%'"), ("TODO: fill in", "TODO"),
                                  ("<placeholder>", "<placeholder>"), ("None %", "None %"), ("nan ms", "nan"),
                                  ("<Brief Title>", "<Brief Title>")):
        mutated = markdown.replace("**Action**: Do the gemm fix.", f"**Action**: Do the gemm fix. {placeholder}")
        problems = validate_analysis(mutated, priority)
        assert any("placeholder" in p and expected in p for p in problems), (placeholder, problems)
    # a C++ template name of the trace in prose (a fusion candidate's op) is no placeholder
    templated = markdown.replace("**Action**: Do the gemm fix.",
                                 "**Action**: Do the gemm fix in torch::autograd::CppNode<SplitLookupFunction_rowwise_Op>.")
    assert not [p for p in validate_analysis(templated, priority) if "placeholder" in p]

    wrong_number = markdown.replace("### P3: Unfused RMSNorm chain", "### P7: Unfused RMSNorm chain")
    problems = validate_analysis(wrong_number, priority)
    assert any("P7" in p and "matches no finding" in p for p in problems)
    assert any("P3" in p and "has no card" in p for p in problems)

    mislabelled = markdown.replace("### P3: Unfused RMSNorm chain", "### P2: Unfused RMSNorm chain")
    problems = validate_analysis(mislabelled, priority)
    assert any("P2 is titled 'Unfused RMSNorm chain'" in p for p in problems)
    assert any("P2 has 2 cards" in p for p in problems)

    duplicated = markdown.replace("## System-Level Optimizations",
                                  "### P1: BF16 GEMMs at 60% of roofline\n\n## System-Level Optimizations")
    problems = validate_analysis(duplicated, priority)
    assert any("P1 has 2 cards" in p for p in problems)
    assert any("P1 is under 'Kernel Fusion Opportunities (Experimental)'" in p for p in problems)
    assert any("not in rank order" in p for p in problems)

    p2 = re.search(r"<a id=\"p2\"></a>\n\n### P2: .*?(?=<a id=\"p4\">)", markdown, re.DOTALL).group(0)
    swapped_cards = markdown.replace(p2, "", 1).replace("## Detailed Analysis", p2 + "## Detailed Analysis", 1)
    problems = validate_analysis(swapped_cards, priority)
    assert any("not in rank order within their sections: P1, P3, P4, P2" in p for p in problems), problems
    misplaced = markdown.replace(p2, "", 1).replace("## Kernel Fusion", p2 + "## Kernel Fusion", 1)
    assert any("P2 is under 'Compute Kernel Optimizations' but belongs under 'System-Level Optimizations'" in p
               for p in validate_analysis(misplaced, priority))

    dangling = markdown.replace("**Action**: Do the gemm fix.", "**Action**: Do the gemm fix, then see P9.")
    assert any("P9" in p for p in validate_analysis(dangling, priority))

    no_row = markdown.replace("| Idle % | 22.0% |\n", "")
    assert any("'Idle %' is missing" in p for p in validate_analysis(no_row, priority))

    no_title = markdown.replace("# Qwen1.5-0.5B - H100 Standalone Analysis", "# Qwen report", 1)
    assert any("title" in p for p in validate_analysis(no_title, priority))

    assert validate_analysis("", priority) == ["the report is empty or shorter than 100 characters"]


def test_plot_is_a_png(findings):
    for priority in (_priority([]), _priority(findings), _priority(findings * 4)):
        png = perf_improvement_png(priority, GPU)
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000
    assert perf_improvement_png(_priority([]), {}).startswith(b"\x89PNG")  # empty timeline too


def test_real_model_info_renders(db, findings):
    info = identify_model(db, trace_id_of(db, "mi300/resnet_act_checkpoint.json.gz"))
    inputs = _inputs(findings, model_info=info, title_model=info.display_name, platform="MI300X")
    markdown = render_analysis(inputs)
    assert markdown.startswith("# ResNet-18 - MI300X Standalone Analysis\n")
    assert "- **Model**: ResNet-18" in markdown and "8 distinct `BasicBlock` instances" in markdown
    assert validate_analysis(markdown, inputs.priority) == []


def test_plot_child_draws_the_same_png_as_the_analysis_process(findings) -> None:
    priority = _priority(findings)
    plot = PlotProcess()
    try:
        plot.submit(priority, GPU)
        png = plot._collect()  # the child's drawing only, no in-process fallback
    finally:
        plot.close()
    assert png is not None and png.startswith(PNG_SIGNATURE)
    assert png == perf_improvement_png(priority, GPU)


def test_a_request_larger_than_the_pipe_buffer_reaches_the_child(findings) -> None:
    """The request goes out from a thread (the child reads it only after warming up)."""
    many = [f.model_copy(update={"finding_id": f"{f.finding_id}-{i}", "details": "x" * 2000})
            for i in range(40) for f in findings]
    priority = _priority(many)
    assert len(priority.model_dump_json()) > 200_000  # well above a 64 KiB pipe buffer
    plot = PlotProcess()
    try:
        plot.submit(priority, GPU)
        png = plot._collect()
    finally:
        plot.close()
    assert png is not None and png.startswith(PNG_SIGNATURE)


def test_a_dead_plot_child_falls_back_to_drawing_in_process(findings) -> None:
    priority = _priority(findings)
    plot = PlotProcess()
    assert plot._child is not None
    plot._child.kill()
    plot._child.wait()
    plot.submit(priority, GPU)
    assert plot.result() == perf_improvement_png(priority, GPU)


def test_an_unused_plot_child_is_stopped() -> None:
    plot = PlotProcess()
    child = plot._child
    assert child is not None
    plot.close()
    assert child.poll() is not None


def test_a_failing_link_check_opens_the_report_and_qualifies_the_summary():
    failing = {"check_name": "linked_gpu_time_share", "value": 0.3, "threshold": 0.95, "verdict": "fail",
               "detail": "mostly unlinked: only 30.0% of the GPU time has a host launch"}
    inputs = _inputs([], quality_checks=[failing])
    markdown = render_analysis(inputs)
    head = markdown.split("## Executive Summary")[0]
    assert "**Trace quality: 1 check(s) failed.**" in head
    assert "> - `linked_gpu_time_share`: mostly unlinked: only 30.0% of the GPU time has a host launch" in head
    summary = markdown.split("## Executive Summary")[1].split("\n## ")[0]
    assert "only 30.0% could be tied to a host launch" in summary and "that linked part spans 12.500 ms" in summary
    assert "No optimization opportunity was found" not in markdown
    assert "| Total Time | 12.500 ms |" in summary  # the linked part still has its timeline
    assert validate_analysis(markdown, inputs.priority) == []
    assert "Trace quality:" not in render_analysis(_inputs([]))  # passing checks open nothing


LONG_KERNEL = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::"
               "TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, "
               "2ul> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
               "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)")


def test_ranked_table_follows_the_executive_summary(findings):
    markdown = render_analysis(_inputs(findings))
    summary = markdown.split("## Executive Summary")[1].split("\n## ")[0]
    table = summary.split("**All findings, by recoverable time**")[1]
    assert "| P | Finding | Category | Impact range | Confidence |" in table
    assert "| P1 | BF16 GEMMs at 60% of roofline | gemm | 12.0–16.0% (1.500–2.000 ms) | high |" in table
    assert "| P4 | Host-to-device copies | multi_kernel | not quantified (qualitative) | medium |" in table
    assert table.index("| P1 |") < table.index("| P2 |") < table.index("| P3 |") < table.index("| P4 |")


def test_kernel_names_are_short_in_tables_and_whole_in_the_appendix(findings):
    synthetic = f"hipGraphLaunch->{LONG_KERNEL} (Synthetic Op)"
    inputs = _inputs(findings, top_operations=[
        {"name": synthetic, "category": "elementwise", "count": 4, "time_ms": 1.0, "percent_of_e2e": 8.0,
         "pct_roofline": None, "bound": None}])
    markdown = render_analysis(inputs)
    assert validate_analysis(markdown, inputs.priority) == []
    head, appendix = markdown.split("\n## Appendix")
    short = "hipGraphLaunch->at::native::vectorized_elementwise_kernel<...> (Synthetic Op)"
    assert f"| 1 | `{short}` | elementwise |" in head and LONG_KERNEL not in head
    names = appendix.split("### Kernel Names")[1].split("\n### ")[0]
    assert f"| `{short}` | `{synthetic}` |" in names
    assert "Kernel Names" not in render_analysis(_inputs(findings))  # nothing shortened, no table


@pytest.mark.parametrize(("name", "short"), [
    (LONG_KERNEL, "at::native::vectorized_elementwise_kernel<...>"),
    ("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)", "ncclDevKernel_Generic"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, __nv_bfloat16>(int, int)",
     "internal::gemvx::kernel<...>"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 3>(int)",
     "at::native::(anonymous namespace)::CatArrayBatchedCopy<...>"),
    # mangled names from the ROCm traces in tests/data (sglang decode, vllm decode, resnet)
    ("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
     "aiter::add_rmsnorm_quant_kernel<...>"),
    ("_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
     "sgl_hip::activation::act_and_mul_kernel<...>"),
    ("_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16b",
     "ck_tile::kentry<...>"),  # cut short by the profiler: the name still reads
    ("aten::mm", "aten::mm"), ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),  # not a C++ symbol: left as it is
])
def test_short_kernel_names(name, short):
    assert short_kernel_name(name) == short


def test_every_real_kernel_name_gets_a_short_readable_name(db):
    names = [row[0] for row in db.execute("select distinct name from kernels").fetchall()]
    names += [row[0] for row in db.execute("select distinct name from op_perf where name like '%->%'").fetchall()]
    assert any(n.startswith("_Z") for n in names)
    for name in names:
        short = short_kernel_name(name)
        assert len(short) <= KERNEL_NAME_MAX_CHARS, name
        assert "_Z" not in short[:3] and "(int" not in short and ", " not in short.split("(Synthetic Op)")[0], name
