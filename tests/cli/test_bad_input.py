"""Bad input: one clear line on stderr, exit 2, no traceback, the warehouse byte-identical."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli

GOOD_EVENT = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10.0, "dur": 5.0, "pid": 1, "tid": 1}


def _write_json(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def _bad_inputs(folder: Path) -> dict[str, Path]:
    full = SMALL_TRACE.read_bytes()
    truncated = folder / "truncated.json.gz"
    truncated.write_bytes(full[: len(full) // 2])
    not_json = folder / "not_json.json"
    not_json.write_text("this is not json {")
    empty = folder / "empty.json"
    empty.write_bytes(b"")
    cut_json = folder / "cut.json"
    cut_json.write_bytes(gzip.decompress(full)[:5000])
    return {
        "truncated gzip": truncated,
        "not JSON": not_json,
        "empty file": empty,
        "JSON cut short": cut_json,
        "no traceEvents": _write_json(folder / "no_events_key.json", {"schemaVersion": 1}),
        "empty event list": _write_json(folder / "empty_list.json", {"traceEvents": []}),
        "no usable events": _write_json(
            folder / "all_malformed.json",
            {"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "dur": 1}, {"ph": "X", "name": "b", "ts": 5, "dur": -3}, 7]},
        ),
        "missing path": folder / "does_not_exist.json.gz",
        "top level not an object": _write_json(folder / "list.json", [GOOD_EVENT]),
    }


def _assert_one_clean_line(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip() and "new," not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tracelake: error:")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "case",
    ["truncated gzip", "not JSON", "empty file", "JSON cut short", "no traceEvents", "empty event list",
     "no usable events", "missing path", "top level not an object"],
)
def test_bad_trace_file(case: str, small_warehouse: Path, tmp_path: Path) -> None:
    bad = _bad_inputs(tmp_path)[case]
    before = snapshot(small_warehouse)
    result = run_cli("ingest", str(bad), "--warehouse", str(small_warehouse))
    _assert_one_clean_line(result)
    assert str(bad.name) in result.stderr
    assert snapshot(small_warehouse) == before
    assert not any((small_warehouse / "staging").glob("*")), "a staging folder was left behind"


def test_malformed_events_are_dropped_and_counted(tmp_path: Path) -> None:
    events = [
        GOOD_EVENT,
        {"ph": "X", "cat": "cpu_op", "name": "bad_ts", "ts": "noon", "dur": 1.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "neg_dur", "ts": 20.0, "dur": -1.0, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "ts": 30.0, "dur": 1.0, "pid": 1, "tid": 1},
        {"cat": "cpu_op", "name": "no_phase", "ts": 40.0},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 12.0, "dur": 2.0, "pid": 0, "tid": 7,
         "args": {"correlation": 1, "stream": 7}},
        {"ph": "C", "name": "counter", "ts": 11.0, "pid": 1, "args": {"value": 3}},
    ]
    trace = _write_json(tmp_path / "malformed.json", {"traceEvents": events})
    folder = tmp_path / "wh"
    result = run_cli("ingest", str(trace), "--warehouse", str(folder))
    assert result.returncode == 0, result.stderr
    rows = json.loads(run_cli(
        "sql", "select check_name, value, verdict, detail from trace_quality where check_name in "
        "('dropped_events', 'unknown_event_phases') order by 1", "--warehouse", str(folder), "--format", "json").stdout)
    dropped = rows[0]
    assert dropped["check_name"] == "dropped_events" and dropped["value"] == 4 and dropped["verdict"] == "warn"
    assert "non_numeric_ts=1" in dropped["detail"] and "negative_dur=1" in dropped["detail"]
    assert json.loads(run_cli("sql", "select count(*) as n from events", "--warehouse", str(folder), "--format", "json").stdout) == [{"n": 3}]


def test_mixed_folder_ingests_traces_and_skips_other_json(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(SMALL_TRACE, folder / "good.json.gz")
    _write_json(folder / "execution_details.json", [{"graph": 1}])
    (folder / "notes.txt").write_text("not a trace")
    result = run_cli("ingest", str(folder), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr and "execution_details.json" in result.stderr
    assert "good.json.gz" in result.stdout


def test_corrupt_trace_in_folder_fails_alone(small_warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "broken.json.gz").write_bytes(SMALL_TRACE.read_bytes()[:100])
    shutil.copy(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz", folder / "good.json.gz")
    target = tmp_path / "wh"
    shutil.copytree(small_warehouse, target)
    result = run_cli("ingest", str(folder), "--warehouse", str(target))
    assert result.returncode == 2
    assert "broken.json.gz" in result.stderr and "Traceback" not in result.stderr
    assert "good.json.gz" in result.stdout


def test_unknown_option_is_a_usage_error() -> None:
    result = run_cli("ingest", "--no-such-flag")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_sql_on_missing_warehouse(tmp_path: Path) -> None:
    result = run_cli("sql", "select 1", "--warehouse", str(tmp_path / "nothing"))
    _assert_one_clean_line(result)
    assert "no warehouse" in result.stderr


def test_bad_sql_is_one_line(small_warehouse: Path) -> None:
    result = run_cli("sql", "select * from no_such_table", "--warehouse", str(small_warehouse))
    _assert_one_clean_line(result)
    assert "query failed" in result.stderr


def test_warehouse_that_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(blocker / "wh"))
    _assert_one_clean_line(result)
    assert "not writable" in result.stderr


def _make_read_only(folder: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits; a read-only bind mount is what really stops writes
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)
    else:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)


def _make_writable(folder: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["umount", str(folder)], check=True)
    else:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_read_only_warehouse(small_warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ro_wh"
    shutil.copytree(small_warehouse, folder)
    before = snapshot(folder)
    _make_read_only(folder)
    try:
        result = run_cli("ingest", str(TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"),
                         "--warehouse", str(folder))
        _assert_one_clean_line(result)
        assert "not writable" in result.stderr
        queried = run_cli("sql", "select count(*) as n from traces", "--warehouse", str(folder), "--format", "json")
    finally:
        _make_writable(folder)
    assert snapshot(folder) == before
    assert queried.returncode == 0, queried.stderr
    assert json.loads(queried.stdout) == [{"n": 1}]
