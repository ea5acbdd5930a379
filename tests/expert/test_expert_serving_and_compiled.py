"""What a senior performance engineer expects the serving, GPU-only and compiled traces' reports to
lead with (../shared/reference/expert_expectations.md, the rows after resnet's); the rules and
helpers are test_expert_expectations.py's."""

from __future__ import annotations

import re

import pytest

from tests.expert.conftest import B200, COMPILED, GPU_ONLY, SGLANG, VLLM
from tests.expert.test_expert_expectations import (
    ATTAINABLE_PERCENT,
    CAPTURED_CATEGORY_SHARES,
    CATEGORY_SHARE_TOLERANCE,
    COMPILE_ADVICE,
    FUSE_ELEMENTWISE_ADVICE,
    _advice,
    _brief,
    _by_rank,
    _category_shares,
    _claims_of_kernels,
    _finding,
    _prose,
    _top,
)

# ---- B200 eager vLLM step: host-bound serving, MoE ------------------------------------------------

def test_b200_leads_with_host_bound_and_gpu_graphs(expert_reports) -> None:
    top = _top(expert_reports[B200])
    assert top["agent"] == "cpu_idle" and re.search(r"launch|host", top["title"], re.I), _brief(top)
    assert re.search(r"graph", top["action"], re.I), top["action"]


def test_b200_moe_is_analyzed_as_moe(expert_reports) -> None:
    report = expert_reports[B200]
    claims = _claims_of_kernels(report, "k.kernel_type = 'moe' or regexp_matches(lower(k.cpu_op_name), 'moe')")
    agents = {fid: _finding(report, fid)["agent"] for fid in claims}
    assert claims and set(agents.values()) == {"moe"}, f"MoE kernels claimed by {agents}"
    assert not [f for f in report.findings if f["agent"] == "generic" and re.search(r"moe", f["title"], re.I)]


def test_b200_moe_has_a_perf_model(expert_reports) -> None:
    moe = [f for f in expert_reports[B200].findings if f["agent"] == "moe"]
    assert moe and all(f["estimate_method"] != "heuristic" for f in moe), [_brief(f) for f in moe]


# ---- MI210 GPU-only trace: kernel-level only -----------------------------------------------------

def test_gpu_only_trace_says_only_kernel_level_analysis_is_possible(expert_reports) -> None:
    report = expert_reports[GPU_ONLY]
    head = report.markdown.split("## Compute Kernel Optimizations", 1)[0]
    assert re.search(r"only kernel[- ]level|kernel[- ]level analysis only|kernel[- ]level only", head, re.I), head[:600]


def test_gpu_only_trace_reports_its_kernel_categories_from_names(expert_reports) -> None:
    """Then kernel categories from names: the time by kernel category, largest first, over all its
    kernels."""
    report = expert_reports[GPU_ONLY]
    head = report.markdown.split("## Compute Kernel Optimizations", 1)[0]
    table = head.split("**Kernel categories**", 1)[1].split("\n\n")[1]
    rows = [line.split("|")[1:-1] for line in table.splitlines()[2:]]
    expected = report.sql("""select kernel_category, sum(dur_us) / 1000 from kernels
                             where trace_id = $trace_id group by 1 order by 2 desc""")
    assert [r[0].strip() for r in rows] == [e[0] for e in expected]
    assert [float(r[2]) for r in rows] == pytest.approx([e[1] for e in expected], abs=1e-3)
    assert expected[0][0] == "CONV"  # a convolution training step, by its kernels' names


def test_gpu_only_trace_claims_no_op_level_or_roofline_finding(expert_reports) -> None:
    report = expert_reports[GPU_ONLY]
    wrong = [_brief(f) for f in report.findings
             if f["estimate_method"] == "quantified" or re.search(r"roofline|aten::", f["title"] + f["insight"], re.I)]
    assert wrong == [], wrong


# ---- torch.compile / Triton: already compiled ------------------------------------------------------

def test_compiled_trace_leads_with_gemm_or_attention_efficiency(expert_reports) -> None:
    report = expert_reports[COMPILED]
    top = _top(report)
    assert top["agent"] in {"gemm", "sdpa"}, _brief(top)
    advice = _advice(report)
    said = [line.strip()[:160] for line in advice.splitlines()
            if COMPILE_ADVICE.search(line) or FUSE_ELEMENTWISE_ADVICE.search(line)]
    assert said == [], said
    assert not [f for f in report.findings if f["agent"] == "kernel_fusion"], "fusion advice for already fused kernels"


def test_compiled_trace_says_its_near_roofline_gemms_are_fine(expert_reports) -> None:
    report = expert_reports[COMPILED]
    near = report.sql("""select count(*) from op_perf where trace_id = $trace_id and platform = $platform
                         and op_category = 'GEMM' and pct_roofline_mean >= $attainable""",
                      platform=report.platform, attainable=ATTAINABLE_PERCENT)[0][0]
    assert near, "the trace has no near-roofline GEMM on this platform"
    assert re.search(r"(?:near|close to|at) (?:the |its )?(?:roofline|attainable)|\bis fine\b|nothing (?:left )?to recover",
                     report.markdown, re.I)


# ---- graph-replay serving traces (vLLM decode, SGLang decode) ------------------------------------

@pytest.mark.parametrize("relative", [VLLM, SGLANG])
def test_graph_replay_report_says_the_capture_folder_was_not_given(expert_reports, relative: str) -> None:
    report = expert_reports[relative]
    assert report.quality["graph_replay_without_capture"] is True
    head = report.markdown.split("## Compute Kernel Optimizations", 1)[0]
    assert re.search(r"capture", head, re.I) and re.search(r"--capture-folder|no capture", head, re.I)
    assert report.run["mode"] == "inference-graph"


def test_vllm_graph_trace_names_no_device_and_says_so(expert_reports) -> None:
    report = expert_reports[VLLM]
    warnings = report.markdown.split("## Warnings", 1)[-1].split("## Compute Kernel Optimizations", 1)[0]
    assert re.search(r"names no device|unknown (?:gpu|device)|no device name", warnings, re.I), warnings[:600]


def test_sglang_never_says_every_category_is_within_target_bounds(expert_reports) -> None:
    report = expert_reports[SGLANG]
    assert not re.search(r"within (?:its|their) target bounds", _prose(report), re.I)


@pytest.mark.parametrize("relative", [VLLM, SGLANG])
def test_capture_folder_report_says_it_used_the_capture(capture_reports, relative: str) -> None:
    report = capture_reports[relative]
    assert report.quality["graph_replay_without_capture"] is False
    head = report.markdown.split("## Compute Kernel Optimizations", 1)[0]
    assert not re.search(r"no capture traces were given", report.markdown, re.I)
    assert re.search(r"capture", head, re.I), "the report does not say the capture traces were merged"
    assert re.search(r"\bdecode\b", head, re.I), "decode phase not stated"


@pytest.mark.parametrize("relative", [VLLM, SGLANG])
def test_capture_folder_categories_match_the_inference_csvs(capture_reports, relative: str) -> None:
    shares = _category_shares(capture_reports[relative])
    for category, expected in CAPTURED_CATEGORY_SHARES[relative].items():
        assert shares.get(category, 0.0) == pytest.approx(expected, abs=CATEGORY_SHARE_TOLERANCE), (category, shares)
    assert shares.get("generic", 0.0) < 10.0, f"'other' still holds {shares.get('generic', 0.0):.1f} % of kernel time"


def test_vllm_capture_leads_with_moe_and_a_perf_model(capture_reports) -> None:
    top = _top(capture_reports[VLLM])
    assert top["agent"] == "moe" and top["estimate_method"] == "quantified", _brief(top)


def test_sglang_capture_leads_with_gemm_and_decode_attention_at_batch_32(capture_reports) -> None:
    report = capture_reports[SGLANG]
    top3 = _by_rank(report)[:3]
    assert {"gemm", "sdpa"} <= {f["agent"] for f in top3 if f["estimate_method"] == "quantified"}, [_brief(f) for f in top3]
    assert re.search(r"batch(?: size)?(?: of)? 32\b|\b32 (?:sequences|requests)", report.markdown, re.I)
    assert not re.search(r"within (?:its|their) target bounds", _prose(report), re.I)
