"""The run's surroundings: a stop signal ends it as Ctrl-C does (128 + signal, one line, nothing
half-written), a full disk is said to be one, and a warehouse path is a path, never a pattern."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli

BIG = TRACES / "mi300" / "resnet_act_checkpoint.json.gz"  # ~1-2 s of ingest: time to be interrupted in
OTHER = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _traces(folder: Path) -> list[str]:
    listed = run_cli("traces", "--warehouse", str(folder), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return sorted(row["trace_id"] for row in json.loads(listed.stdout))


def _stop_when(process: subprocess.Popen[str], ready: callable, signum: int) -> tuple[int, str]:
    deadline = time.monotonic() + 120
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


def _staging_started(folder: Path) -> callable:
    return lambda: any((folder / "staging").glob(".tracelake-staging-*"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_during_ingest_exits_like_ctrl_c_and_keeps_nothing(small_warehouse: Path, tmp_path: Path,
                                                                         signum: int) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(small_warehouse, folder)
    before = _traces(folder)
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "ingest", str(BIG), "--warehouse", str(folder)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "DO_NOT_TRACK": "1"})
    code, stderr = _stop_when(process, _staging_started(folder), signum)
    name = signal.Signals(signum).name
    assert code == 128 + signum, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"tracelake: stopped by {name}"), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert _traces(folder) == before
    assert not list((folder / "staging").iterdir()) and not list(folder.glob(".tracelake-*"))
    assert run_cli("ingest", str(BIG), "--warehouse", str(folder), "--quiet").returncode == 0
    assert len(_traces(folder)) == len(before) + 1


def test_sigterm_during_analyze_keeps_the_previous_report(small_warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    shutil.copytree(small_warehouse, folder)
    out = tmp_path / "report"
    assert run_cli("analyze", str(SMALL_TRACE), "--warehouse", str(folder), "--out", str(out), "--quiet").returncode == 0
    before = snapshot(out)
    process = subprocess.Popen([sys.executable, "-m", "tracelake", "analyze", str(BIG), "--warehouse", str(folder),
                                "--out", str(out), "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "DO_NOT_TRACK": "1"})
    code, stderr = _stop_when(process, lambda: any(tmp_path.glob(".tracelake-staging-*/new/metadata")),
                              signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert snapshot(out) == before
    assert not list(tmp_path.glob(".tracelake-*"))


def test_a_warehouse_path_with_glob_characters_is_a_path(small_warehouse: Path, built_once, tmp_path: Path) -> None:
    # decoys: what each name would match as a pattern
    shutil.copytree(built_once(OTHER), tmp_path / "wh1")
    shutil.copytree(tmp_path / "wh1", tmp_path / "wXh")
    for name in ("wh[1]", "w*h", "w[*]h"):
        folder = tmp_path / name
        shutil.copytree(small_warehouse, folder)  # a copied warehouse: its views are re-pointed on open
        assert len(_traces(folder)) == 1
        ingested = run_cli("ingest", str(BIG), "--warehouse", str(folder), "--quiet")
        assert ingested.returncode == 0, ingested.stderr
        assert len(_traces(folder)) == 2, name  # the decoys' traces are not read through a pattern
    assert run_cli("build", "--warehouse", str(tmp_path / "w*h")).returncode == 0
    assert len(_traces(tmp_path / "w*h")) == 2


def test_a_warehouse_path_duckdb_cannot_open_is_refused(tmp_path: Path) -> None:
    refused = run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(tmp_path / "wh?"), "--quiet")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [refused.stderr.strip()] and "'?'" in refused.stderr
    assert not (tmp_path / "wh?").exists()


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MB file system (tmpfs), root only."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_says_so(small_warehouse: Path, small_disk: Path) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 << 20))  # leaves about 1 MB
    ingested = run_cli("ingest", str(BIG), "--warehouse", str(small_disk / "wh"), "--quiet")
    assert ingested.returncode == 2, ingested.stderr
    assert ingested.stderr.strip().splitlines()[-1].startswith("tracelake: error: disk full"), ingested.stderr
    assert "Traceback" not in ingested.stderr
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    (small_disk / "filler2").write_bytes(b"\0" * max(0, free - (16 << 10)))  # 16 kB left: no report fits
    analyzed = run_cli("analyze", str(SMALL_TRACE), "--warehouse", str(small_warehouse), "--out",
                       str(small_disk / "report"), "--quiet")
    assert analyzed.returncode == 2, analyzed.stderr
    assert "disk full" in analyzed.stderr and "Traceback" not in analyzed.stderr
    assert not (small_disk / "report").exists()
    assert sorted(p.name for p in small_disk.iterdir()) in (["filler", "filler2"], ["filler", "filler2", "wh"])
