"""`analyze --out` and `dashboard --out` replace only folders TraceLake wrote: a user's files, the
working folder, the trace's own folder and the warehouse's data are refused (exit 2, one line)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli
from tracelake.folders import MARKER_NAME, FolderKind, OutputFolderError, claim_output_folder
from tracelake.pipeline import ANALYSIS_FOLDER, default_out_dir


def _refused(result, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracelake: error:"), result.stderr
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _analyze(warehouse: Path, *args: str, cwd: Path | None = None, trace: Path = SMALL_TRACE):
    return run_cli("analyze", str(trace), "--warehouse", str(warehouse), "--quiet", *args, cwd=cwd)


def test_a_folder_with_user_files_is_refused_even_with_force(small_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "scratch"
    (out / "my_experiments").mkdir(parents=True)
    (out / "my_experiments" / "run.py").write_text("print('mine')\n")
    (out / "NOTES.md").write_text("my notes\n")
    before = snapshot(out)
    _refused(_analyze(small_warehouse, "--out", str(out)), str(out), "NOTES.md", "did not write")
    _refused(_analyze(small_warehouse, "--out", str(out), "--force"), "NOTES.md")
    assert snapshot(out) == before


def test_the_working_folder_is_refused(small_warehouse: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text("import torch\n")
    before = snapshot(project)
    _refused(_analyze(small_warehouse, "--out", ".", cwd=project), "the working folder")
    assert snapshot(project) == before
    empty = tmp_path / "empty"
    (empty / "inner").mkdir(parents=True)
    _refused(_analyze(small_warehouse, "--out", ".", cwd=empty / "inner"), "the working folder")  # empty too
    _refused(_analyze(small_warehouse, "--out", "..", cwd=empty / "inner"), "the working folder")  # and a parent


def test_the_traces_own_folder_is_refused(small_warehouse: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / SMALL_TRACE.name
    shutil.copy(SMALL_TRACE, trace)
    before = snapshot(traces)
    _refused(_analyze(small_warehouse, "--out", str(traces), trace=trace), str(trace))
    _refused(_analyze(small_warehouse, "--out", str(tmp_path), trace=trace), str(trace))  # a parent of it too
    assert snapshot(traces) == before


def test_the_warehouse_data_is_refused(small_warehouse: Path) -> None:
    before = snapshot(small_warehouse)
    _refused(_analyze(small_warehouse, "--out", str(small_warehouse / "parquet")), "parquet")
    assert (small_warehouse / "lake.json").is_file()  # a lakehouse: its data path is its own too
    _refused(_analyze(small_warehouse, "--out", str(small_warehouse / "lake" / "report")), "lake")
    _refused(_analyze(small_warehouse, "--out", str(small_warehouse)), "holds")
    _refused(run_cli("dashboard", "--warehouse", str(small_warehouse), "--out", str(small_warehouse)), "holds")
    assert snapshot(small_warehouse) == before


def test_a_report_folder_is_replaced_and_force_keeps_the_users_files(small_warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    assert _analyze(small_warehouse, "--out", str(out)).returncode == 0
    assert (out / MARKER_NAME).is_file()
    (out / "analysis.md").write_text("stale")
    rerun = _analyze(small_warehouse, "--out", str(out))
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "analysis.md").read_text().startswith("#")  # replaced by a new report
    (out / "NOTES.md").write_text("my notes on this report\n")
    _refused(_analyze(small_warehouse, "--out", str(out)), "NOTES.md", "--force")
    forced = _analyze(small_warehouse, "--out", str(out), "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "NOTES.md").read_text() == "my notes on this report\n"
    assert (out / "analysis.md").is_file() and (out / "perf_report_csvs").is_dir()
    assert not list(tmp_path.glob(".tracelake-*"))  # no staging left beside it


def test_two_traces_of_one_folder_get_a_report_folder_each(small_warehouse: Path, tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    first, second = traces / "h100_bert.json.gz", traces / "mi300_bert.json.gz"
    shutil.copy(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", first)
    shutil.copy(TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz", second)
    for trace in (first, second):
        result = _analyze(small_warehouse, trace=trace)
        assert result.returncode == 0, result.stderr
    reports = sorted(p.name for p in traces.iterdir() if p.is_dir())
    assert reports == ["h100_bert_analysis", "mi300_bert_analysis"]
    assert "NVIDIA" in (traces / "h100_bert_analysis" / "analysis.md").read_text()
    assert default_out_dir(first, second).name == "h100_bert_vs_mi300_bert_analysis"


DEMO = FolderKind(name="analysis", sign="metadata/run.json", entries=frozenset({"analysis.md", "metadata"}))


def test_a_report_written_before_the_marker_counts_as_ours(tmp_path: Path) -> None:
    old = tmp_path / "old"
    (old / "metadata").mkdir(parents=True)
    (old / "metadata" / "run.json").write_text("{}")  # not TraceLake's: no version in it
    (old / "analysis.md").write_text("# old\n")
    with pytest.raises(OutputFolderError, match="did not write"):
        claim_output_folder(old, DEMO)
    (old / "metadata" / "run.json").write_text('{"tracelake_version": "0.1.0", "trace_path": "t.json"}')
    assert claim_output_folder(old, DEMO).ours == ("analysis.md", "metadata")
    (old / "NOTES.md").write_text("mine")
    with pytest.raises(OutputFolderError, match="--force"):
        claim_output_folder(old, DEMO)
    assert claim_output_folder(old, DEMO, force=True).foreign == ("NOTES.md",)
    assert claim_output_folder(tmp_path / "new", ANALYSIS_FOLDER).ours == ()
    (tmp_path / "empty").mkdir()
    assert claim_output_folder(tmp_path / "empty", ANALYSIS_FOLDER).ours == ()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputFolderError, match="not a folder"):
        claim_output_folder(tmp_path / "file", ANALYSIS_FOLDER)


def test_a_read_only_trace_folder_asks_for_out(small_warehouse: Path, tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        trace = mount / SMALL_TRACE.name
        shutil.copy(SMALL_TRACE, trace)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        _refused(_analyze(small_warehouse, trace=trace), "Read-only file system", "--out")
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
