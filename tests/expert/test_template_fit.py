"""Template text that must fit the trace it is printed for (issue 26, item 7): each sentence checked on
a trace that has the fact it rests on and on one that lacks it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.conftest import DATA, TRACES
from tests.expert.conftest import (
    ALL_TRACES,
    B200,
    BERT_H100,
    CAPTURE_FOLDERS,
    COMPILED,
    QWEN_H100,
    RESNET,
    SGLANG,
    TIMESFORMER,
    ExpertReport,
    _report,
)
from tests.pipeline.conftest import copy_of
from tracelake.analyzers.cpu_idle_findings import queued_remedies
from tracelake.analyzers.cpu_idle_metrics import GapReasonStats
from tracelake.pipeline import AnalyzeOptions, run_analysis
from tracelake.warehouse import Warehouse

QUALITY_BANNER = re.compile(r"Fallback analysis|trace-quality gate failed", re.I)
REPLAY_BANNER = "> **GPU graph replay.**"
COLLECTIVE_OR_STREAM = re.compile(r"collective|other stream|reorder streams", re.I)


def _card(report: ExpertReport, title: str) -> str | None:
    match = re.search(rf"^### P\d+: {re.escape(title)}.*?(?=^### |^## )", report.markdown, re.M | re.S)
    return match.group(0) if match else None


def _gap_reasons(report: ExpertReport) -> list[GapReasonStats]:
    metrics = json.loads((report.out / "category_data" / "cpu_idle_metrics.json").read_text())["metrics"]
    return [GapReasonStats(**r) for r in metrics["gaps_by_reason"] if r["gap_class"] == "queued_waiting"]


def test_a_graph_replay_is_not_called_a_quality_failure(expert_reports: dict[str, ExpertReport]) -> None:
    for relative in CAPTURE_FOLDERS:
        report = expert_reports[relative]
        assert report.quality["graph_replay_steps"], relative
        head = report.markdown.split("## Executive Summary")[0]
        assert REPLAY_BANNER in head and "--capture-folder" in head, relative
        assert not QUALITY_BANNER.search(head), relative


def test_the_replay_note_is_only_for_graph_replays(expert_reports: dict[str, ExpertReport]) -> None:
    for relative in ALL_TRACES:
        if relative not in CAPTURE_FOLDERS:
            assert REPLAY_BANNER not in expert_reports[relative].markdown, relative
    # a real quality failure keeps its banner: the CPU-only trace has no GPU events
    assert QUALITY_BANNER.search(expert_reports["cpu_only/cpu_mlp_training.json.gz"].markdown)


def test_the_replay_note_goes_with_the_capture_traces(capture_reports: dict[str, ExpertReport]) -> None:
    for relative, report in capture_reports.items():
        if not report.quality["graph_replay_steps"]:
            assert REPLAY_BANNER not in report.markdown, relative


def test_queued_work_advice_names_only_the_dependencies_the_trace_has(expert_reports: dict[str, ExpertReport]) -> None:
    """SGLang decode: one stream, no collective; its queued gaps are inside graph replays and queued kernels."""
    report = expert_reports[SGLANG]
    reasons = {r.reason for r in _gap_reasons(report)}
    assert reasons == {"inside_graph_replay", "queued_ahead"}
    card = _card(report, "Queued work waiting on a dependency leaves the GPU idle")
    assert card is not None
    action = re.search(r"^\*\*Action\*\*: (.*)$", card, re.M)
    assert action and "graph" in action.group(1)
    assert not COLLECTIVE_OR_STREAM.search(action.group(1)), action.group(1)
    resolution = re.search(r"^\*\*Resolution:\*\* shorten or overlap the dependency: (.*)$", report.markdown, re.M)
    assert resolution and not COLLECTIVE_OR_STREAM.search(resolution.group(1)), resolution


def test_queued_work_next_to_collectives_is_told_to_overlap_them(expert_reports: dict[str, ExpertReport]) -> None:
    """The ResNet trace's queued gaps include ones next to collectives (its all-reduces)."""
    reasons = _gap_reasons(expert_reports[RESNET])
    assert "waits_on_collective" in {r.reason for r in reasons}
    assert "overlap the collective" in queued_remedies(reasons)
    bert = _gap_reasons(expert_reports[BERT_H100])
    assert not COLLECTIVE_OR_STREAM.search(queued_remedies(bert))


@pytest.fixture(scope="module")
def h100_on_mi300x(warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExpertReport]:
    """The H100 Qwen trace read against the MI300X roofline (`--platform MI300X`, as TraceLens' default)."""
    copy = copy_of(warehouse, tmp_path_factory, "expert_other_platform")
    out = tmp_path_factory.mktemp("other_platform") / "qwen_h100_on_mi300x"
    outcome = run_analysis(TRACES / QWEN_H100, copy, AnalyzeOptions(jobs=1, platform="MI300X", out_dir=out))
    con = copy.connect_read_only()
    yield _report(QWEN_H100, out, outcome.trace_id, outcome.platform, con)
    con.close()


def test_another_platforms_roofline_is_named_in_every_roofline_sentence(
        h100_on_mi300x: ExpertReport, expert_reports: dict[str, ExpertReport]) -> None:
    report = h100_on_mi300x
    assert report.platform == "MI300X"
    assert "on this GPU" not in report.markdown and "of this GPU" not in report.markdown
    assert "what these ops reach on MI300X (the roofline's platform, not this trace's GPU)" in report.markdown
    # the note says why: the trace's own device, and the option that chose another
    warnings = report.markdown.split("## Warnings")[1].split("\n## ")[0]
    assert re.search(r"ran on .*H100.*, but its roofline is read against MI300X \(--platform MI300X\)", warnings), warnings
    # the same trace on its own device's roofline says "this GPU", with no such note
    own = expert_reports[QWEN_H100]
    assert own.platform == "H100"
    assert "large GEMMs attain on this GPU" in own.markdown and "what these ops reach on this GPU" in own.markdown
    assert "but its roofline is read against" not in own.markdown


def _fusion_candidates(report: ExpertReport) -> list[dict]:
    return json.loads((report.out / "category_data" / "kernel_fusion_metrics.json").read_text())["metrics"]["candidates"]


def test_layout_copies_beside_an_eager_attention_are_no_chain_of_their_own(
        expert_reports: dict[str, ExpertReport]) -> None:
    """TimeSformer: the QKV projection (addmm) and two layout copies in TimesformerSelfAttention were
    a P3 "Elementwise chain (3 kernels)", while the P1 fused attention reads Q, K, V strided anyway."""
    report = expert_reports[TIMESFORMER]
    candidates = _fusion_candidates(report)
    attention = [c for c in candidates if c["pattern"] == "eager_attention" and c["status"] == "estimated"]
    assert attention and _card(report, attention[0]["name"]) is not None
    copies = [c for c in candidates if c["scope"] == "TimesformerSelfAttention" and c["pattern"] != "eager_attention"
              and set(c["kernel_types"]) <= {"gemm", "copy"}]
    assert copies, [c["name"] for c in candidates]
    for c in copies:
        assert c["status"] == "rejected" and "fused attention" in c["reject_reason"], c
        assert _card(report, c["name"]) is None
    # a chain beside no eager attention keeps its card: TimesformerLayer's
    assert any(_card(report, c["name"]) for c in candidates if c["scope"] == "TimesformerLayer")


def test_an_elementwise_chain_counts_no_gemm_among_its_kernels(expert_reports: dict[str, ExpertReport]) -> None:
    seen_gemm_led = 0
    for relative in ALL_TRACES:
        for c in _fusion_candidates(expert_reports[relative]) if expert_reports[relative].out.joinpath(
                "category_data", "kernel_fusion_metrics.json").exists() else []:
            match = re.match(r"Elementwise chain \((\d+) kernels\)", c["name"])
            if match:
                non_gemm = sum(t not in ("gemm", "conv") for t in c["kernel_types"])
                assert int(match.group(1)) == non_gemm, (relative, c["name"], c["kernel_types"])
                seen_gemm_led += "gemm" in c["kernel_types"]
    assert seen_gemm_led  # the TimeSformer chain after its QKV GEMM


def test_the_fusion_section_lists_the_candidates_it_left_out(expert_reports: dict[str, ExpertReport]) -> None:
    for relative in ALL_TRACES:
        report = expert_reports[relative]
        section = report.markdown.split("## Kernel Fusion Opportunities")[1].split("\n## ")[0]
        path = report.out / "category_data" / "kernel_fusion_metrics.json"
        candidates = _fusion_candidates(report) if path.exists() else []
        carded = [c for c in candidates if _card(report, c["name"])]
        if candidates and not carded:
            assert "No kernel fusion opportunities detected" not in section, relative
            for c in candidates:
                assert c["name"] in section, (relative, c["name"])
        elif not candidates:
            assert "No kernel fusion opportunities detected" in section, relative
    b200 = expert_reports[B200]
    assert _fusion_candidates(b200) and "No kernel fusion finding" in b200.markdown


DATA_LOADING = DATA / "data_loading"  # make_data_loading_trace.py: the DataLoader trace and its twin


@pytest.fixture(scope="module")
def data_loading_reports(warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    copy = copy_of(warehouse, tmp_path_factory, "expert_data_loading")
    out = tmp_path_factory.mktemp("data_loading")
    reports = {}
    for name in ("data_loading.json.gz", "host_copy.json.gz"):
        run_analysis(DATA_LOADING / name, copy, AnalyzeOptions(jobs=1, out_dir=out / name))
        reports[name] = (out / name / "analysis.md").read_text()
    yield reports


def test_a_gap_in_a_dataloader_fetch_is_called_data_loading(data_loading_reports: dict[str, str]) -> None:
    """The host sat in `aten::copy_` inside the DataLoader's `__next__`: the report names the fetch,
    not the copy, and points at the input pipeline; the same copy outside a DataLoader stays a copy."""
    card = re.search(r"^### P\d+: Host work between GPU phases.*?(?=^### |^## )", data_loading_reports["data_loading.json.gz"],
                     re.M | re.S)
    assert card, data_loading_reports["data_loading.json.gz"][:3000]
    assert "the host was loading the next batch in `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`" \
        in card.group(0)
    assert "the host was in `aten::copy_`" not in card.group(0)
    assert "num_workers" in card.group(0)
    twin = re.search(r"^### P\d+: Host work between GPU phases.*?(?=^### |^## )", data_loading_reports["host_copy.json.gz"],
                     re.M | re.S)
    assert twin and "the host was in `aten::copy_`" in twin.group(0)
    assert "DataLoader fetch" not in twin.group(0) and "loading the next batch" not in twin.group(0)


def test_a_serving_steps_host_work_is_resolved_by_graph_mode_not_data_loading(expert_reports) -> None:
    """The b200 vLLM step's host gaps sit inside the forward pass (flashinfer's first-call JIT), not in
    an input pipeline: the card's resolution says what its action says, GPU-graph mode."""
    host_work = next(f for f in expert_reports[B200].findings if f["finding_id"] == "cpu_idle:host-work")
    resolution = host_work["details"].split("**Resolution:**")[1].split("\n")[0]
    assert "graph" in resolution and "data loading" not in resolution
    assert "graph" in host_work["action"]


def test_each_batchnorm_pass_states_its_own_share_of_the_computation(expert_reports) -> None:
    """resnet's BatchNorm forward and backward cards each name their pass's share of the GPU
    computation time, not the two passes together under either name."""
    report = expert_reports[RESNET]
    shares = {m.group(1): float(m.group(2))
              for m in re.finditer(r"BatchNorm (forward|backward) takes ([0-9.]+) % of the GPU computation time",
                                   report.markdown)}
    assert set(shares) == {"forward", "backward"}
    by_pass = dict(report.sql(
        "select op_category, sum(kernel_time_sum_us) from norm_ops where trace_id = $trace_id and is_trace_platform "
        "and name ilike '%batch_norm%' group by op_category"))
    assert by_pass["NORM_fwd"] != by_pass["NORM_bwd"]
    # each share is its pass's kernel time over the same computation time: their ratio is the passes'
    assert shares["backward"] / shares["forward"] == pytest.approx(by_pass["NORM_bwd"] / by_pass["NORM_fwd"], rel=0.05)


def test_attention_backend_advice_names_the_platforms_own_libraries(expert_reports) -> None:
    """The compiled MI300X trace's fused attention is within its band: the remaining lever is a faster
    backend, named from the ROCm stack (CK / aiter), not Hopper's FlashAttention-3 / cuDNN."""
    attention = [f for f in expert_reports[COMPILED].findings if f["agent"] == "sdpa"]
    within = [f for f in attention if "remaining lever" in f["action"]]
    assert within, [f["action"] for f in attention]
    for finding in within:
        assert "CK / aiter" in finding["action"] and "Hopper" not in finding["action"], finding["action"]
