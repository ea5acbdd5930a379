"""`tracelake dashboard`: the data, the colours and charts, the page in a real headless Chromium, bad input.

One warehouse for the module, from real test traces (TraceLens, MIT licence) and synthetic later
runs of one of them (tests/reports/trace_variants.py), tagged as two runs of an inference model and
one training run on the same platform, plus two untagged traces (one CPU-only, one GPU-only);
the first run is analyzed, so its row links to analysis.md.
"""

from __future__ import annotations

import csv
import html as html_module
import json
import re
import shutil
import tomllib
from pathlib import Path

import duckdb
import pytest
from PIL import Image

from tests.cli.conftest import snapshot
from tests.conftest import HTA_TRACES, TRACES, run_cli
from tests.reports.headless import browser, console_messages, open_page, with_script
from tests.reports.trace_variants import write_slower_run
from tracelake.dbt_runner import run_dbt
from tracelake.folders import MARKER_NAME
from tracelake.reports import dashboard_charts
from tracelake.reports.dashboard import DATA_JSON, INDEX, render_dashboard
from tracelake.reports.dashboard_data import DashboardData, report_href
from tracelake.warehouse import Warehouse

BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
CPU_ONLY = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
GPU_ONLY = TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz"
HTA_RANKS = HTA_TRACES  # sampled_rank-0 and sampled_rank-1 of one job
GEMM_KERNELS = "gemm|cutlass"
GEMM_FACTOR = 1.5
ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "seeds"
SGLANG = TRACES / "inference" / "sglang_decode" / "sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURES = ROOT / "tests" / "data" / "captures" / "inference__sglang_decode"
SECTION_HEADINGS = ("GPU time breakdown per trace", "Kernel time by category, run over run", "Training vs inference",
                    "Largest regressions between consecutive runs", "Analysis reports")


def _tags(**tags: str) -> list[str]:
    return [arg for key, value in tags.items() for arg in ("--tag", f"{key}={value}")]


def _ok(*args: str) -> str:
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dashboard")
    warehouse, runs = root / "warehouse", root / "runs"
    write_slower_run(BERT, runs / "bert_r2.json.gz", GEMM_KERNELS, GEMM_FACTOR)
    write_slower_run(BERT, runs / "bert_train.json.gz", "elementwise", 1.2)
    _ok("ingest", str(BERT), "--warehouse", str(warehouse), "--quiet", *_tags(model="bert", mode="inference", run="r1"))
    _ok("ingest", str(runs / "bert_r2.json.gz"), "--warehouse", str(warehouse), "--quiet",
        *_tags(model="bert", mode="inference", run="r2"))
    _ok("ingest", str(runs / "bert_train.json.gz"), "--warehouse", str(warehouse), "--quiet",
        *_tags(model="bert", mode="training", run="r1"))
    _ok("ingest", str(CPU_ONLY), str(GPU_ONLY), "--warehouse", str(warehouse), "--quiet")
    # the CPU-only trace tagged into the bert training runs: no GPU time, so it must not join them
    _ok("ingest", str(CPU_ONLY), "--warehouse", str(warehouse), "--quiet", *_tags(model="bert", mode="training", run="r0"))
    # a second trace under the training run tag r1, not a rank of one job: a tag collision
    write_slower_run(BERT, runs / "bert_train_again.json.gz", "elementwise", 1.3)
    _ok("ingest", str(runs / "bert_train_again.json.gz"), "--warehouse", str(warehouse), "--quiet",
        *_tags(model="bert", mode="training", run="r1"))
    # two ranks of one distributed job, one run
    _ok("ingest", str(HTA_RANKS), "--warehouse", str(warehouse), "--quiet", *_tags(model="hta", mode="training", run="j1"))
    _ok("analyze", str(BERT), "--warehouse", str(warehouse), "--out", str(root / "analysis_bert"), "--quiet")
    printed = _ok("dashboard", "--warehouse", str(warehouse))
    return {"root": root, "warehouse": warehouse, "printed": Path(printed.strip()),
            "index": warehouse / "dashboard" / INDEX, "analysis_md": root / "analysis_bert" / "analysis.md"}


@pytest.fixture(scope="module")
def data(built: dict[str, Path]) -> DashboardData:
    return DashboardData.model_validate_json((built["index"].parent / DATA_JSON).read_text())


@pytest.fixture(scope="module")
def chromium() -> str:
    found = browser()
    if found is None:
        pytest.fail("headless Chromium is needed for the dashboard tests: apt-get install chromium (make test does)")
    return found


# ---- the command and its data -----------------------------------------------------------------------

def test_prints_the_page_path_and_writes_page_and_data(built: dict[str, Path]) -> None:
    assert built["printed"] == built["index"]
    assert built["index"].is_file() and (built["index"].parent / DATA_JSON).is_file()
    assert sorted(p.name for p in built["index"].parent.iterdir()) == [MARKER_NAME, DATA_JSON, INDEX]
    assert not [p for p in built["warehouse"].iterdir() if p.name.startswith(".tracelake-staging")]  # none left


def test_runs_are_grouped_and_ordered(data: DashboardData) -> None:
    assert data.trace_count == 8
    group = next(g for g in data.groups if g.key == "bert | inference | H100")
    assert [r.run_label for r in group.runs] == ["r1", "r2"]
    assert group.categories[0] == "GEMM"
    untagged = {t.file_name: t for t in data.traces if t.model_source == "file name"}
    assert untagged["gpu_only_trace.json.gz"].model == "gpu_only_trace"
    cpu_only = next(t for t in data.traces if t.file_name == CPU_ONLY.name)
    assert cpu_only.breakdown.total_time_ms is None and cpu_only.platform is None  # listed, no GPU platform


def test_traces_without_gpu_work_stay_out_of_groups_and_comparisons(data: DashboardData) -> None:
    cpu_only = next(t for t in data.traces if t.file_name == CPU_ONLY.name)
    assert cpu_only.model == "bert" and cpu_only.mode == "training"
    group = next(g for g in data.groups if cpu_only.trace_id in [r.trace_id for r in g.runs])
    assert group.key == "bert | training | unknown"  # no GPU platform: not one of the H100 bert groups
    assert all(cpu_only.trace_id not in (c.before_trace_id, c.after_trace_id) for c in data.regressions)
    training = next(p for p in data.mode_comparisons if (p.model, p.platform) == ("bert", "H100")).training
    assert cpu_only.trace_id not in training.trace_ids and len(training.trace_ids) == 2  # bert_train and its tag twin


def test_gemm_slowdown_is_the_top_regression(data: DashboardData) -> None:
    top = data.regressions[0]
    assert (top.model, top.op_category, top.before_run_label, top.after_run_label) == ("bert", "GEMM", "r1", "r2")
    assert top.change_ms == pytest.approx(top.after_ms - top.before_ms)
    assert 40 < top.change_percent < 60  # GEMM kernels made 1.5x as long
    assert all(c.change_ms > 0 for c in data.regressions)
    assert data.regressions == sorted(data.regressions, key=lambda c: -c.change_ms)


def test_training_and_inference_side_by_side(data: DashboardData) -> None:
    pair = data.mode_comparisons[0]  # models run both ways come first
    assert (pair.model, pair.platform) == ("bert", "H100")
    assert len(pair.training.trace_ids) == 2 and len(pair.inference.trace_ids) == 2
    assert (pair.training.run_count, pair.inference.run_count) == (1, 2)  # the training pair share the tag r1
    assert pair.inference.top_categories[0].op_category == "GEMM"
    mean = pair.inference.mean_breakdown
    parts = [mean.computation_time_ms, mean.exposed_comm_time_ms, mean.exposed_memcpy_time_ms, mean.idle_time_ms]
    assert sum(parts) == pytest.approx(mean.total_time_ms, rel=1e-6)


def test_analysis_report_is_linked(built: dict[str, Path], data: DashboardData) -> None:
    assert data.analyses_recorded and len(data.reports) == 1
    link = data.reports[0]
    r1 = next(t for t in data.traces if t.run_label == "r1" and t.mode == "inference")
    assert link.trace_id == r1.trace_id and r1.reports == [link]
    assert link.finding_count is not None and link.finding_count >= 1 and link.top_finding_title
    assert not link.href.startswith(("/", "file:"))  # relative: both live under the same temp folder
    page = (built["index"].parent / link.href).resolve()
    assert page == built["analysis_md"].with_name("analysis.html").resolve()  # the report rendered as HTML
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<h1>" in html and "<table>" in html
    assert '<img src="perf_improvement.png"' in html and "base64" not in html  # the plot is the file beside it
    assert (page.parent / "perf_improvement.png").is_file()


def test_ranks_of_one_job_are_one_run_with_their_spread(data: DashboardData) -> None:
    ranks = [t for t in data.traces if t.model == "hta"]
    assert sorted(t.rank for t in ranks) == [0, 1] and {t.run_index for t in ranks} == {1}
    assert all(t.run_trace_count == 2 and t.run_label == "j1" for t in ranks)
    group = next(g for g in data.groups if g.model == "hta")
    assert len(group.runs) == 1
    run = group.runs[0]
    assert sorted(run.ranks) == [0, 1] and len(run.trace_ids) == 2
    assert run.kernel_time_min_ms <= run.kernel_time_ms <= run.kernel_time_max_ms
    assert run.kernel_time_min_ms < run.kernel_time_max_ms  # the two ranks differ: the spread shows it
    assert not [c for c in data.regressions if c.model == "hta"]  # no rank-to-rank "regression"


def test_collective_kernels_are_a_category_of_the_job_chart(data: DashboardData) -> None:
    """The two sampled ranks of a 128-rank job spent most of their kernel time in NCCL kernels
    (rank 0: 396.2 ms, rank 1: 379.1 ms, issue 24); the chart's run is their mean, and its categories
    add up to the run's kernel time with the collectives in it."""
    run = next(g for g in data.groups if g.model == "hta").runs[0]
    collectives = next(c for c in run.categories if c.op_category == "collectives")
    assert collectives.kernel_time_ms == pytest.approx((396.199 + 379.053) / 2, abs=0.01)
    assert sum(c.kernel_time_ms for c in run.categories) == pytest.approx(run.kernel_time_ms)
    assert collectives.percent == pytest.approx(100 * collectives.kernel_time_ms / run.kernel_time_ms)
    assert collectives.percent == pytest.approx(60.8, abs=0.1)  # (396.2 + 379.1) / (607.8 + 667.5)


def test_the_two_sampled_ranks_are_a_job_of_2_of_128_with_their_collectives(data: DashboardData) -> None:
    """The jobs section: the folder's two ranks are job `hta`, 2 of 128 ranks (126 missing), and its chart
    has each rank's collectives (rank 0: 65.2 % of its kernel time, rank 1: 56.8 %)."""
    job = next(j for j in data.jobs if j.job_id == "hta")
    assert (job.rank_count, job.world_size, len(job.missing_ranks)) == (2, 128, 126)
    shares = {column.rank: next(c.percent for c in column.categories if c.category == "collectives")
              for column in job.ranks}
    assert shares == {0: pytest.approx(65.18, abs=0.01), 1: pytest.approx(56.78, abs=0.01)}
    communication = job.spread("communication")
    assert communication is not None and (communication.min_ms, communication.max_ms) == pytest.approx((379.053, 396.199))


def test_rank_0_of_the_128_rank_job_spends_65_percent_of_its_kernel_time_in_collectives(tmp_path: Path) -> None:
    """Issue 24: rank 0 spent 396 ms in NCCL kernels, 65 % of its kernel time, and the chart showed none."""
    warehouse = tmp_path / "warehouse"
    _ok("ingest", str(HTA_RANKS / "sampled_rank-0.json.gz"), "--warehouse", str(warehouse), "--quiet")
    _ok("dashboard", "--warehouse", str(warehouse), "--out", str(tmp_path / "page"))
    page = DashboardData.model_validate_json((tmp_path / "page" / DATA_JSON).read_text())
    run = page.groups[0].runs[0]
    shares = {c.op_category: c.percent for c in run.categories}
    assert shares["collectives"] == pytest.approx(65.2, abs=0.1)  # 396.199 / (396.199 + 211.645) ms
    assert run.kernel_time_ms == pytest.approx(396.199 + 211.645, abs=0.01)
    assert page.groups[0].categories[0] == "collectives"  # the largest category, first in the legend
    assert "collectives" in (tmp_path / "page" / INDEX).read_text()


def test_a_two_rank_job_is_one_run_everywhere_and_its_ranks_are_named(built: dict[str, Path],
                                                                     data: DashboardData) -> None:
    """Issue 28: a two-rank job was "1 run" in the category charts and "2 runs", both labelled by the
    run, in training vs inference. A run is run_groups' run everywhere; each rank is named."""
    group = next(g for g in data.groups if g.model == "hta")
    side = next(p for p in data.mode_comparisons if p.model == "hta").training
    assert len(group.runs) == 1 and side.run_count == 1 and len(side.trace_ids) == 2
    assert sorted(t.trace_label for t in data.traces if t.model == "hta") == ["j1 \u00b7 rank 0", "j1 \u00b7 rank 1"]
    page = built["index"].read_text()
    modes = page[page.index('<section id="modes">'):page.index('<section id="regressions">')]
    hta_row = modes[modes.index('data-model="hta"'):]
    hta_row = hta_row[:hta_row.index("</tr>")]
    assert "1 run (2 traces)" in hta_row and "2 runs" not in hta_row
    assert ">j1 \u00b7 rank 0<" in hta_row and ">j1 \u00b7 rank 1<" in hta_row
    header = page[page.index('<article class="card chart-card"'):]
    assert re.search(r"<h3>hta</h3>\s*<span class=\"sub\">training · [^<]* · 1 run</span>", header)


def test_graph_capture_traces_are_not_workloads(tmp_path: Path) -> None:
    """Issue 28: a capture-folder trace (`bs_32`, 0.011 ms) was listed as a workload. Its ops are
    merged into the replay trace that lists it: the page lists the replay only and says so."""
    serve = tmp_path / "serve"
    (serve / "capture_traces").mkdir(parents=True)
    shutil.copyfile(SGLANG, serve / SGLANG.name)
    for source in SGLANG_CAPTURES.iterdir():
        shutil.copyfile(source, serve / "capture_traces" / source.name)
    warehouse = tmp_path / "warehouse"
    _ok("ingest", str(serve), "--warehouse", str(warehouse), "--quiet")
    _ok("dashboard", "--warehouse", str(warehouse), "--out", str(tmp_path / "page"))
    page = DashboardData.model_validate_json((tmp_path / "page" / DATA_JSON).read_text())
    assert [t.file_name for t in page.traces] == [SGLANG.name] and page.trace_count == 1
    assert page.capture_trace_count == 1 and [g.model for g in page.groups] == ["sglang_Qwen3-8B_decode"]
    html = (tmp_path / "page" / INDEX).read_text()
    assert "bs_32" not in html and "1 graph-capture trace merged into its replay" in html


def test_traces_sharing_a_run_tag_get_a_note_not_a_renamed_run(data: DashboardData) -> None:
    training = [t for t in data.traces if t.group_key == "bert | training | H100"]
    assert {t.run_label for t in training} == {"r1"} and all("(2)" not in t.run_label for t in data.traces)
    assert [len(g.runs) for g in data.groups if g.key == "bert | training | H100"] == [1]
    assert any("share the run tag 'r1'" in note and "bert | training | H100" in note for note in data.notes)
    assert all(c.group_key != "bert | training | H100" for c in data.regressions)


def test_run_group_rules_pass_their_dbt_unit_tests(suite_warehouse: Warehouse, tmp_path: Path) -> None:
    """The run-group rules with edge cases (serving phases split groups: a decode run is never
    compared with a prefill + decode run; natural run order; ranks of one job; the rest category;
    consecutive-run pairs) are dbt unit tests beside the marts, run here on a copy of the warehouse."""
    copy = tmp_path / "warehouse.duckdb"
    shutil.copyfile(suite_warehouse.db_path, copy)  # dbt runs on the classic layout; unit tests bring their rows
    selected = [f"{model},test_type:unit" for model in ("run_groups", "run_group_categories", "run_category_changes",
                                                        "run_mode_breakdowns")]
    results = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *selected])
    names = sorted(r.node.name for r in results.results)
    assert {"run_groups_split_serving_phases", "run_groups_leave_out_graph_capture_traces",
            "run_mode_breakdowns_count_a_jobs_ranks_as_one_run"} <= set(names) and len(names) == 7
    assert all(str(r.status) == "pass" for r in results.results)


def test_report_href_is_file_url_without_a_shared_folder(tmp_path: Path) -> None:
    report = tmp_path / "analysis.md"
    assert report_href(report, tmp_path / "dash") is None  # not on disk
    report.write_text("# report\n")
    assert report_href(report, tmp_path / "dash") == "../analysis.md"
    elsewhere = Path("/nonexistent-top-level-folder/dashboard")
    assert report_href(report, elsewhere) == report.resolve().as_uri()


def test_warehouse_without_analyses_table(data: DashboardData) -> None:
    page = render_dashboard(data.model_copy(update={"reports": [], "analyses_recorded": False}))
    assert "Nothing has been analyzed into this warehouse yet" in page


def test_page_escapes_text_from_the_warehouse(data: DashboardData) -> None:
    nasty = "<img src=x onerror=alert(1)>.json"
    trace = data.traces[0].model_copy(update={"file_name": nasty, "tags": {"model": nasty}})
    page = render_dashboard(data.model_copy(update={"traces": [trace, *data.traces[1:]]}))
    assert nasty not in page and "&lt;img src=x onerror=alert(1)&gt;.json" in page


# ---- the page ----------------------------------------------------------------------------------------

def _outside_scripts(html: str) -> str:
    return re.sub(r"<script\b[^>]*>.*?</script>", "<script></script>", html, flags=re.DOTALL | re.IGNORECASE)


def test_page_has_no_network_references(built: dict[str, Path]) -> None:
    """The chart libraries are inlined: every script is inline (no src), and outside the scripts'
    code the page names no URL, stylesheet, image or frame."""
    html = built["index"].read_text()
    tags = re.findall(r"<script\b[^>]*>", html, re.IGNORECASE)
    assert len(tags) >= 5 and not [t for t in tags if re.search(r"\bsrc\s*=", t)]
    markup = _outside_scripts(html)
    assert "http://" not in markup and "https://" not in markup
    assert not re.search(r"<(link|img|iframe|object|embed)\b|\bsrc\s*=|@import|url\(", markup, re.IGNORECASE)
    for spec in re.findall(r'<script type="application/json" data-chart-for="[^"]+">(.*?)</script>', html):
        assert "http" not in spec  # no $schema URL, no data URL: the specs carry their rows


def test_page_renders_in_headless_chromium(built: dict[str, Path], data: DashboardData, chromium: str,
                                           tmp_path: Path) -> None:
    shot = tmp_path / "dashboard.png"
    run = open_page(built["index"], screenshot=shot, window=(1400, 2200))
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.console_messages == []
    with Image.open(shot) as image:
        assert image.size == (1400, 2200)
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 200, "the screenshot has hardly any colours"
        ink = sum(count for count, rgb in colours if min(rgb) < 235)  # page and cards are near-white
        assert ink / (1400 * 2200) > 0.03, "the screenshot is mostly blank"
        chart_blue = sum(count for count, rgb in colours if rgb == (0x32, 0x74, 0xA1))
        assert chart_blue > 500, "no computation-coloured bars drawn"


def test_dom_after_scripts_has_every_trace_section_and_link(built: dict[str, Path], data: DashboardData,
                                                            chromium: str) -> None:
    run = open_page(built["index"])
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.console_messages == []
    dom = run.stdout
    for trace in data.traces:
        assert trace.file_name in dom
    for heading in SECTION_HEADINGS:
        assert f">{heading}</h2>" in dom
    assert re.search(r'<div id="filters" class="filters">', dom), "the filter script did not run"
    assert ">chart not drawn:" not in dom  # what the page writes in place of a chart that failed
    assert "8 of 8 traces shown" in dom
    hrefs = re.findall(r'href="([^"#][^"]*analysis\.html)"', dom)
    assert hrefs and all((built["index"].parent / h).resolve() == built["analysis_md"].with_name("analysis.html").resolve()
                         for h in hrefs)
    assert "Not compared:" in dom


INTERACTIONS = """<script>
(function () {
  var out = {};
  var search = document.getElementById("filters-search");
  search.value = "GEMM"; search.dispatchEvent(new Event("input"));
  var rows = document.querySelectorAll("#regressions-table tbody tr");
  out.regressions = rows.length;
  out.regressionsShown = Array.prototype.filter.call(rows, function (r) { return !r.hidden; }).length;
  out.breakdownShown = document.getElementById("filters-count").textContent;
  search.value = "zzz-no-such-thing"; search.dispatchEvent(new Event("input"));
  out.nothingShown = document.getElementById("filters-count").textContent;
  search.value = ""; search.dispatchEvent(new Event("input"));
  var table = document.getElementById("regressions-table");
  var heads = table.querySelectorAll("thead th");
  var change = Array.prototype.findIndex.call(heads, function (h) { return h.textContent.trim() === "Change (ms)"; });
  heads[change].click();
  out.ascending = Array.prototype.map.call(table.tBodies[0].rows, function (r) { return parseFloat(r.cells[change].textContent.replace(/[,+]/g, "")); });
  out.sortState = heads[change].getAttribute("aria-sort");
  heads[change].click();
  out.descending = Array.prototype.map.call(table.tBodies[0].rows, function (r) { return parseFloat(r.cells[change].textContent.replace(/[,+]/g, "")); });
  // the charts draw asynchronously: hover and zoom one once it is drawn
  setTimeout(function () {
    var charts = document.querySelectorAll("div.chart");
    out.charts = charts.length;
    out.drawn = Array.prototype.filter.call(charts, function (c) { return c.querySelectorAll(".mark-rect path").length > 0; }).length;
    out.legends = Array.prototype.map.call(charts, function (c) {
      return Array.prototype.map.call(c.querySelectorAll(".role-legend-label text"), function (t) { return t.textContent; });
    });
    var chart = document.querySelector('[aria-label^="kernel time per category and run, hta"]');
    var bars = chart.querySelectorAll(".mark-rect path");
    function ticks() { return Array.prototype.map.call(chart.querySelectorAll(".role-axis-label text"), function (t) { return t.textContent; }).join("|"); }
    var box = bars[0].getBoundingClientRect(), x = box.left + box.width / 2, y = box.top + box.height / 2;
    bars[0].dispatchEvent(new PointerEvent("pointermove", {bubbles: true, clientX: x, clientY: y}));
    var tip = document.getElementById("vg-tooltip-element");
    out.tooltip = tip && tip.classList.contains("visible") ? tip.textContent : null;
    out.ticksBefore = ticks();
    bars[0].dispatchEvent(new WheelEvent("wheel", {bubbles: true, cancelable: true, deltaY: -400, clientX: x, clientY: y}));
    setTimeout(function () { out.ticksAfter = ticks(); document.title = "RESULT" + JSON.stringify(out); }, 500);
  }, 1500);
})();
</script>"""


def test_search_sort_tooltips_and_zoom_work_in_chromium(built: dict[str, Path], data: DashboardData,
                                                       chromium: str) -> None:
    probe = built["index"].with_name("interactions.html")
    probe.write_text(with_script(built["index"].read_text(), INTERACTIONS))
    try:
        run = open_page(probe)
    finally:
        probe.unlink()
    assert run.console_messages == [], run.console_messages
    found = re.search(r"<title>RESULT(.*?)</title>", run.stdout)
    assert found, run.stdout[-2000:]
    out = json.loads(html_module.unescape(found.group(1)))
    assert out["regressions"] >= 2 and 1 <= out["regressionsShown"] < out["regressions"]  # only GEMM rows
    assert out["nothingShown"].startswith("0 of")
    assert out["ascending"] == sorted(out["ascending"]) and out["sortState"] == "ascending"
    assert out["descending"] == sorted(out["descending"], reverse=True)
    # every chart drew its bars, and each legend lists its categories in chart order, collectives included
    expected = [g.categories for g in data.groups if g.categories] + [j.categories for j in data.jobs if j.categories]
    assert out["charts"] == out["drawn"] == len(expected)
    assert out["legends"] == expected
    assert sum("collectives" in legend for legend in out["legends"]) == 2  # the hta run and the hta job
    # hovering the hta run's largest bar (collectives) gives its numbers
    run_collectives = next(c for c in next(g for g in data.groups if g.model == "hta").runs[0].categories
                           if c.op_category == "collectives")
    assert out["tooltip"] and "collectives" in out["tooltip"] and f"{run_collectives.kernel_time_ms:,.3f}" in out["tooltip"]
    assert "mean of 2 ranks" in out["tooltip"]
    assert out["ticksAfter"] != out["ticksBefore"]  # the wheel zoomed the time axis


def test_console_check_catches_page_errors(built: dict[str, Path], chromium: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    html = built["index"].read_text()
    broken.write_text(with_script(html, "<script>throw new Error('injected failure')</script>"))
    messages = open_page(broken).console_messages
    assert any("Uncaught Error: injected failure" in line for line in messages), messages


def test_console_lines_are_recognised() -> None:
    log = ('[1:1:1129/210958.6:INFO:CONSOLE:1] "Uncaught ReferenceError: f is not defined", source: file:///x (1)\n'
           "[1:1:1129/210958.6:VERBOSE1:network_delegate.cc(37)] NetworkDelegate::NotifyBeforeURLRequest\n")
    assert console_messages(log) == [log.splitlines()[0]]


# ---- re-runs and bad input ---------------------------------------------------------------------------

def test_rerun_replaces_the_page_whole(built: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "dash"
    for _ in range(2):
        assert run_cli("dashboard", "--warehouse", str(built["warehouse"]), "--out", str(out)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dash"]
    assert sorted(p.name for p in out.iterdir()) == [MARKER_NAME, DATA_JSON, INDEX]


def test_out_folder_with_other_files_is_refused(built: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    before = snapshot(tmp_path)
    result = run_cli("dashboard", "--warehouse", str(built["warehouse"]), "--out", str(tmp_path))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "choose a new or empty folder" in result.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["missing folder", "empty folder", "warehouse without traces"])
def test_empty_warehouse_is_bad_input(tmp_path: Path, kind: str) -> None:
    warehouse = tmp_path / "wh"
    if kind != "missing folder":
        warehouse.mkdir()
    if kind == "warehouse without traces":
        duckdb.connect(str(warehouse / "warehouse.duckdb")).close()
    before = snapshot(tmp_path)
    result = run_cli("dashboard", "--warehouse", str(warehouse), "--out", str(tmp_path / "dash"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelake: error:") and str(warehouse) in lines[0]
    assert result.stdout == ""
    assert snapshot(tmp_path) == before and not (tmp_path / "dash").exists()


# ---- colours and the vendored chart libraries ------------------------------------------------------

# the op categories the models make besides the seeds' (macros/op_category.sql), and the
# communication kernels' and the uncategorized unlinked kernels' categories (trace_category_kernel_time)
MACRO_CATEGORIES = {"triton", "record_param_comms", "elementwise", "reduce", "multi_tensor_apply", "other", "collectives",
                    "unlinked"}


def _seed(name: str) -> list[dict[str, str]]:
    with (SEEDS / f"{name}.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_op_category_has_its_own_colour_and_none_is_the_exposed_communication_red() -> None:
    colours = _seed("chart_colours")
    reserved = next(r["colour"] for r in colours if r["name"] == "Exposed communication")
    named = {r["name"]: r["colour"] for r in colours if r["role"] != "timeline"}
    compiled = {r["compiled_op_category"] for r in _seed("agent_categories") if r["compiled_op_category"]}
    categories = ({r["category"] for r in _seed("op_categories")} | MACRO_CATEGORIES | compiled
                  | {c.replace("_fwd", "_bwd") for c in compiled}
                  | {r["category"] for r in _seed("agent_categories") if r["category_kind"] == "op"}
                  # a kernel no op launched counts under its kernel category (trace_category_kernel_time)
                  | {r["category"] for r in _seed("kernel_taxonomy") if r["category"] != "other"})
    assert categories - named.keys() == set()  # every category the models make has its own colour
    assert len(set(named.values())) == len(named)  # no two categories (or spares) share a colour
    assert reserved not in named.values()
    assert named["MoE_fused"] != named["RoPE_fwd"]  # the collision issue 28 found
    assert all(re.fullmatch(r"#[0-9a-f]{6}", r["colour"]) for r in colours)


def test_the_page_takes_its_colours_from_the_seed(data: DashboardData) -> None:
    seed = {r["name"]: r["colour"] for r in _seed("chart_colours")}
    on_page = {c for g in data.groups for c in g.categories} | {c for j in data.jobs for c in j.categories}
    assert "collectives" in on_page and data.colours["collectives"] == seed["collectives"]
    assert {c: data.colours[c] for c in on_page} == {c: seed[c] for c in on_page}
    assert data.timeline_colours == {r["name"]: r["colour"] for r in _seed("chart_colours") if r["role"] == "timeline"}


def test_breakdown_colours_match_the_report_plot(data: DashboardData) -> None:
    from tracelake.reports.plot import _BREAKDOWN

    assert {label: colour for label, _, _, colour in _BREAKDOWN} == data.timeline_colours


def test_vendored_chart_libraries_ship_with_their_licences() -> None:
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "vendor/*" in package_data["tracelake.reports"]
    for name in dashboard_charts.VENDOR_SCRIPTS:
        bundle = (dashboard_charts.VENDOR / name).read_text()
        assert len(bundle) > 50_000 and "</script" not in bundle.lower()  # safe to inline
        licence = dashboard_charts.VENDOR / name.replace(".min.js", ".LICENSE")
        assert "Redistribution and use in source and binary forms" in licence.read_text()
    assert "d3-scale" in (dashboard_charts.VENDOR / "THIRD_PARTY_LICENSES.txt").read_text()


def test_chart_specs_stay_inside_their_script_element() -> None:
    nasty = {"column": "</script><script>alert(1)</script> & <b>"}
    text = str(dashboard_charts.spec_json(nasty))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == nasty
