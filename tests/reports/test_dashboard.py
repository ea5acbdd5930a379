"""`tracelake dashboard`: the data, the SVG helpers, the page in a real headless Chromium, bad input.

One warehouse for the module, from real test traces (TraceLens, MIT licence) and synthetic later
runs of one of them (tests/reports/trace_variants.py), tagged as two runs of an inference model and
one training run on the same platform, plus two untagged traces (one CPU-only, one GPU-only);
the first run is analyzed, so its row links to analysis.md.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest
from PIL import Image

from tests.cli.conftest import snapshot
from tests.conftest import HTA_TRACES, TRACES, run_cli
from tests.reports.headless import browser, console_messages, open_page
from tests.reports.trace_variants import write_slower_run
from tracelake.dbt_runner import run_dbt
from tracelake.folders import MARKER_NAME
from tracelake.reports import svg_charts
from tracelake.reports.dashboard import DATA_JSON, INDEX, render_dashboard
from tracelake.reports.dashboard_data import DashboardData, report_href
from tracelake.warehouse import Warehouse

BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
CPU_ONLY = TRACES / "cpu_only" / "cpu_mlp_training.json.gz"
GPU_ONLY = TRACES / "mi210" / "gpu_only_trace" / "gpu_only_trace.json.gz"
HTA_RANKS = HTA_TRACES  # sampled_rank-0 and sampled_rank-1 of one job
GEMM_KERNELS = "gemm|cutlass"
GEMM_FACTOR = 1.5
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
    selected = [f"{model},test_type:unit" for model in ("run_groups", "run_group_categories", "run_category_changes")]
    results = run_dbt(copy, tmp_path / "dbt", ["test", "--select", *selected])
    names = sorted(r.node.name for r in results.results)
    assert "run_groups_split_serving_phases" in names and len(names) == 5
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

def test_page_has_no_network_references(built: dict[str, Path]) -> None:
    html = built["index"].read_text()
    assert "http://" not in html and "https://" not in html
    assert not re.search(r"<(link|img|iframe|object|embed)\b|\bsrc\s*=|@import|url\(", html, re.IGNORECASE)


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
  var zoom = document.querySelector("button.zoom");
  var before = zoom.closest(".chart-card").querySelector("svg").getBoundingClientRect().width;
  zoom.click();
  out.zoomed = zoom.closest(".chart-card").classList.contains("zoomed");
  out.widthRatio = zoom.closest(".chart-card").querySelector("svg").getBoundingClientRect().width / before;
  out.tooltips = document.querySelectorAll(".chart-card svg title").length;
  document.title = "RESULT" + JSON.stringify(out);
})();
</script>"""


def test_search_sort_zoom_and_tooltips_work_in_chromium(built: dict[str, Path], chromium: str) -> None:
    probe = built["index"].with_name("interactions.html")
    probe.write_text(built["index"].read_text().replace("</body>", INTERACTIONS + "</body>"))
    try:
        run = open_page(probe)
    finally:
        probe.unlink()
    assert run.console_messages == [], run.console_messages
    found = re.search(r"<title>RESULT(.*?)</title>", run.stdout)
    assert found, run.stdout[-2000:]
    import html as html_module
    import json

    out = json.loads(html_module.unescape(found.group(1)))
    assert out["regressions"] >= 2 and 1 <= out["regressionsShown"] < out["regressions"]  # only GEMM rows
    assert out["nothingShown"].startswith("0 of")
    assert out["ascending"] == sorted(out["ascending"]) and out["sortState"] == "ascending"
    assert out["descending"] == sorted(out["descending"], reverse=True)
    assert out["zoomed"] and out["widthRatio"] > 1.5
    assert out["tooltips"] > 4


def test_console_check_catches_page_errors(built: dict[str, Path], chromium: str, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    html = built["index"].read_text()
    broken.write_text(html.replace("</body>", "<script>throw new Error('injected failure')</script></body>"))
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


# ---- the SVG helpers ---------------------------------------------------------------------------------

def test_svg_text_is_escaped() -> None:
    nasty = "<script>alert('x')</script> & \"quoted\""
    segments = [svg_charts.Segment(nasty, 1.0, "#3274a1", nasty)]
    chart = svg_charts.column_chart([svg_charts.Column(nasty, nasty, tuple(segments))], unit=nasty)
    for svg in (svg_charts.stacked_bar(segments, label=nasty), chart):
        assert "<script>" not in svg and "&lt;script&gt;" in svg
        assert svg.startswith("<svg ") and svg.endswith("</svg>")


def test_empty_and_zero_charts_draw_without_errors() -> None:
    assert "no time recorded" in svg_charts.stacked_bar([svg_charts.Segment("Idle", 0.0, "#b0b0b0")])
    assert "no runs" in svg_charts.column_chart([], unit="ms")
    assert svg_charts.value_bar(1.0, 0.0, colour="#c03d3e").count("<rect") == 2


@pytest.mark.parametrize(("maximum", "ticks"), [
    (0.459, [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]), (31.9, [0.0, 10.0, 20.0, 30.0, 40.0]),
    (11.6, [0.0, 2.5, 5.0, 7.5, 10.0, 12.5]), (0.0, [0.0, 1.0]),
])
def test_nice_ticks(maximum: float, ticks: list[float]) -> None:
    assert svg_charts.nice_ticks(maximum) == ticks


def test_breakdown_colours_match_the_report_plot() -> None:
    from tracelake.reports.plot import _BREAKDOWN

    assert [(label, colour) for label, _, _, colour in _BREAKDOWN] == list(svg_charts.BREAKDOWN_SEGMENTS)


def test_category_colours_are_stable() -> None:
    assert svg_charts.category_colour("GEMM") == "#3274a1"
    assert svg_charts.category_colour("SomeNewCategory") == svg_charts.category_colour("SomeNewCategory")

