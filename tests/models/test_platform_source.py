"""Whose word a trace's platform is, on the real traces that showed a guessed platform as a fact.

A V100 and an A100 rank of the shared jobs name their GPU; a B200 and an H100 trace with their `deviceProperties`
removed (as an exported or hand-trimmed trace comes) names none, and a torch.compile trace renamed to
a GPU the platforms seed does not know names one nobody knows. `runs` labels each with the GPU it
ran on, or with nothing, never with the roofline assumed for analysis; `platform_source` says whose
word the platform is, and a report of an assumed roofline says so in its title, its roofline headers
and every % of roofline above 100 %. The roofline assumed follows the trace's runtime: a CUDA trace
is read against H100 (var default_platform_cuda), a ROCm trace against MI300X (default_platform_rocm).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli
from tests.reports.trace_variants import write_with_device_name
from tracelake.dbt_runner import run_dbt
from tracelake.ingestion import ingest_paths
from tracelake.lakehouse import open_warehouse
from tracelake.warehouse import Warehouse

SINGLE_RANKS = Path("/work/shared/traces/jobs/single_ranks")
V100_RANK = SINGLE_RANKS / "df_index_resolver__rank1_of_2__v100.json.gz"  # Tesla V100-SXM2-32GB
A100_RANK = SINGLE_RANKS / "negative_queue__rank0_of_16__a100.json.gz"  # NVIDIA A100-SXM4-80GB
B200 = TRACES / "b200" / "eager_trace.json.gz"
H100_TIMESFORMER = TRACES / "h100" / "facebook_timesformer-base-finetuned-k400__1016002.json.gz"
SMALL = TRACES / "torch_compile_triton" / "trace.json.gz"
MI300_BERT = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"  # ROCm: hip version keys
HTA_RANKS = Path("/work/shared/traces/hta/trace_filter")  # no deviceProperties: a CUDA job's GPU unnamed

pytestmark = pytest.mark.skipif(not SINGLE_RANKS.is_dir(), reason="the shared job traces are not on this machine")


def write_without_device(source: Path, target: Path) -> None:
    """A real trace with its deviceProperties key removed: a trace that names no device."""
    with gzip.open(source, "rt") as handle:
        trace = json.load(handle)
    del trace["deviceProperties"]
    with gzip.open(target, "wt") as handle:
        json.dump(trace, handle)


@pytest.fixture(scope="module")
def platform_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """The real V100 and A100 ranks, the B200 trace without deviceProperties, a GPU the seed does
    not know, and a deviceless trace tagged platform=H100."""
    folder = tmp_path_factory.mktemp("platform_traces")
    write_without_device(B200, folder / "b200_no_device.json.gz")
    write_without_device(MI300_BERT, folder / "mi300_no_device.json.gz")
    write_with_device_name(SMALL, folder / "unknown_gpu.json.gz", "Foo GPU 9000")
    tagged = tmp_path_factory.mktemp("tagged")
    write_without_device(SMALL, tagged / "tagged_no_device.json.gz")
    wh = Warehouse(tmp_path_factory.mktemp("platform_warehouse"))
    for paths, tags in (([V100_RANK, A100_RANK, folder], {}), ([tagged], {"platform": "H100"})):
        report = ingest_paths(paths, wh, tags=tags, jobs=2)
        assert not report.failed, report.failed
    # HTA's two sampled ranks of a 128-rank job name no device: ingested as the job trace_filter
    result = run_cli("ingest", str(HTA_RANKS), "--warehouse", str(wh.root), "--quiet")
    assert result.returncode == 0, result.stderr
    return wh


@pytest.fixture(scope="module")
def platform_rows(platform_warehouse: Warehouse) -> dict[str, tuple]:
    """file name -> (runs.platform, runs.platform_source, traces.platform, traces.platform_source)."""
    with platform_warehouse.connect_read_only() as con:
        return {row[0]: row[1:] for row in con.execute(
            "select runs.file_name, runs.platform, runs.platform_source, traces.platform, traces.platform_source "
            "from runs join traces using (trace_id)").fetchall()}


def test_a_job_of_ranks_naming_no_device_lists_no_platform(platform_warehouse: Warehouse) -> None:
    """The dashboard's job row shows "platform unknown", not the MI300X roofline assumed for its ranks."""
    with platform_warehouse.connect_read_only() as con:
        job = con.execute("select rank_count, platforms from jobs where job_id = 'trace_filter'").fetchone()
        ranks = con.execute("select distinct platform, platform_source, device_name from job_ranks "
                            "where job_id = 'trace_filter'").fetchall()
        labels = con.execute("select distinct platform, platform_source from runs "
                             "where tags['job'] = 'trace_filter'").fetchall()
    assert job is not None and job[0] == 2 and not job[1]
    assert ranks == [("H100", "assumed", None)]  # CUDA ranks (cudaLaunchKernel calls, no version keys)
    assert labels == [(None, "assumed")]


def test_the_platform_source_rule_and_data_tests_pass(platform_warehouse: Warehouse, tmp_path: Path) -> None:
    """runs' and int_trace_platforms' unit tests (tag / known device / unknown device / no device; the
    default by runtime from version keys or runtime calls) and the accepted_values of
    runs', traces' and job_ranks' platform_source on these traces, run by dbt on a copy."""
    copy = tmp_path / "warehouse.duckdb"  # dbt writes into the database it tests on
    shutil.copyfile(platform_warehouse.db_path, copy)
    result = run_dbt(copy, tmp_path / "dbt", ["test", "--select", "runs", "traces", "job_ranks", "int_trace_platforms"])
    statuses = {str(r.node.name): str(getattr(r.status, "value", r.status)) for r in result.results}
    assert statuses["runs_label_a_platform_only_by_a_tag_or_the_trace_device"] == "pass"
    assert statuses["an_unknown_gpu_is_assumed_the_default_of_its_runtime"] == "pass"
    source_tests = [name for name in statuses if name.startswith("accepted_values") and "platform_source" in name]
    assert len(source_tests) == 3, statuses
    assert set(statuses.values()) == {"pass"}, statuses


@pytest.mark.parametrize(("file_name", "expected"), [
    (V100_RANK.name, ("V100_SXM2", "trace device", "V100_SXM2", "trace device")),
    (A100_RANK.name, ("A100", "trace device", "A100", "trace device")),
    # no device: no label in runs (the dashboard says "platform unknown"); the roofline assumed for its
    # runtime only: H100 for a CUDA trace, MI300X for a ROCm one
    ("b200_no_device.json.gz", (None, "assumed", "H100", "assumed")),
    ("mi300_no_device.json.gz", (None, "assumed", "MI300X", "assumed")),
    # a GPU the seed does not know: labelled with the trace's own device name, never MI300X
    ("unknown_gpu.json.gz", ("Foo GPU 9000", "assumed", "MI300X", "assumed")),
    # the platform tag names it
    ("tagged_no_device.json.gz", ("H100", "tag", "MI300X", "assumed")),
])
def test_runs_label_each_trace_with_the_gpu_it_ran_on(platform_rows: dict[str, tuple], file_name: str,
                                                      expected: tuple) -> None:
    assert platform_rows[file_name] == expected


@pytest.fixture(scope="module")
def assumed_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict, Path]:
    """(stderr, analysis.md, run.json, its folder) of the H100 TimeSformer trace without deviceProperties: a
    CUDA trace, so the H100 roofline is assumed for it (its addmm at 63-75 %, not 102-105 % of MI300X's)."""
    folder = tmp_path_factory.mktemp("assumed")
    trace = folder / "timesformer_no_device.json.gz"
    write_without_device(H100_TIMESFORMER, trace)
    result = run_cli("analyze", str(trace), "--warehouse", str(folder / "wh"), "--out", str(folder / "out"))
    assert result.returncode == 0, result.stderr
    out = folder / "out"
    return result.stderr, (out / "analysis.md").read_text(), json.loads((out / "metadata" / "run.json").read_text()), folder


def test_an_assumed_roofline_is_one_warning_line(assumed_report: tuple[str, str, dict, Path]) -> None:
    stderr, _, run, _ = assumed_report
    assert run["platform"] == "H100" and run["platform_source"] == "assumed"
    warned = [line for line in stderr.splitlines() if "roofline assumed" in line]
    assert warned == ["warning: the trace: roofline assumed H100 (the default for a CUDA trace), it names no device; "
                      "pass --platform PLATFORM to read it against its GPU (tracelake platforms lists them)"]


def test_the_report_says_the_roofline_is_assumed(assumed_report: tuple[str, str, dict, Path]) -> None:
    _, markdown, _, _ = assumed_report
    lines = markdown.splitlines()
    assert lines[0] == ("# TimesformerForVideoClassification - H100 roofline, assumed (the trace names no device) "
                        "Standalone Analysis")
    assert any(line.startswith("> **Assumed roofline.** The trace names no device") for line in lines)
    assert "| % of Roofline of the assumed H100 roofline |" in markdown
    assert "- **Platform**: NVIDIA H100 SXM5 (`H100`): assumed, not the trace's GPU" in lines
    # a finding's title that reads a % of roofline names the roofline as assumed
    titled = [line for line in lines if line.startswith("### P") and re.search(r"% of .*roofline", line)]
    assert titled and all("of the assumed H100 roofline" in line for line in titled), titled
    # read against a GPU of its own vendor, no op of this H100 trace is above the roofline
    figures = [float(v) for line in lines for m in ROOFLINE_PERCENT.findall(line) for v in m if v]
    assert figures and max(figures) <= 100
    # the agents' own detail pages say it too, in their platform line and roofline column
    gemm = (assumed_report[3] / "out" / "category_findings" / "gemm_findings.md").read_text()
    assert "| Platform (roofline) | H100, assumed (not the trace's GPU) |" in gemm
    assert "| % E2E | % Roofline (assumed H100) | Bound |" in gemm


ROOFLINE_PERCENT = re.compile(r"(\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?))? % of (?:the )?(?:[\w-]+ )?roofline", re.I)
ROOFLINE_CELL = re.compile(r"\| (\d+(?:\.\d+)?)% \|")


@pytest.fixture(scope="module")
def assumed_b200_markdown(tmp_path_factory: pytest.TempPathFactory) -> str:
    """analysis.md of the B200 trace without deviceProperties: a CUDA trace read against the H100 roofline
    assumed for it, which its aten::mm beats (129 %)."""
    folder = tmp_path_factory.mktemp("assumed_b200")
    write_without_device(B200, folder / "b200_no_device.json.gz")
    result = run_cli("analyze", str(folder / "b200_no_device.json.gz"), "--warehouse", str(folder / "wh"),
                     "--out", str(folder / "out"), "--quiet")
    assert result.returncode == 0, result.stderr
    return (folder / "out" / "analysis.md").read_text()


def test_a_deviceless_rocm_trace_is_assumed_mi300x(platform_warehouse: Warehouse) -> None:
    """traces.platform_assumed_for names the runtime whose default each assumed roofline is."""
    with platform_warehouse.connect_read_only() as con:
        rows = {row[0]: row[1:] for row in con.execute(
            "select file_name, platform, platform_assumed_for from traces where platform_source = 'assumed'").fetchall()}
    assert rows["mi300_no_device.json.gz"] == ("MI300X", "rocm")
    assert rows["b200_no_device.json.gz"] == ("H100", "cuda")
    assert rows["sampled_rank-0.json.gz"] == ("H100", "cuda")  # no version keys: its cuda* calls


def test_no_op_beats_an_assumed_roofline_unsaid(assumed_b200_markdown: str) -> None:
    """Its aten::mm above 100 % of the assumed roofline: every line saying so says the roofline is
    assumed, itself or in the heading of its list or the header of its table."""
    markdown = assumed_b200_markdown
    context, above = "", []
    for line in markdown.splitlines():
        table_row, list_item = line.startswith("|"), line.startswith("- ")
        if (table_row and "Roofline" in line) or (line and not table_row and not list_item):
            context = line
        figures = [float(v) for m in ROOFLINE_PERCENT.findall(line) for v in m if v]
        figures += [float(v) for v in ROOFLINE_CELL.findall(line)] if table_row and "Roofline" in context else []
        if any(figure > 100 for figure in figures):
            above.append(line)
            assert "assumed" in line or "assumed" in context, (context, line)
    assert above, above  # the near-roofline line
    # the validation warning names the ops above it, and the roofline as assumed
    anomalies = [line for line in markdown.splitlines() if "aten::mm (129 %)" in line]
    assert anomalies and all("H100 roofline, assumed" in line for line in anomalies)


def test_the_dashboard_lists_the_analysis_platform_as_assumed(assumed_report: tuple[str, str, dict, Path]) -> None:
    """analyses keeps whose word its platform was; the dashboard's report row and group say it."""
    folder = assumed_report[3]
    with open_warehouse(folder / "wh").connect_read_only() as con:
        assert con.execute("select platform, platform_source from analyses").fetchall() == [("H100", "assumed")]
    result = run_cli("dashboard", "--warehouse", str(folder / "wh"), "--out", str(folder / "dashboard"))
    assert result.returncode == 0, result.stderr
    page = (folder / "dashboard" / "index.html").read_text()
    assert '<td>H100 <span class="sub">(assumed: the trace names no known GPU)</span></td>' in page
    assert "· platform unknown ·" in page  # its run group: no platform known, never MI300X
