"""The command line people expect: --version, -h, help, --debug anywhere, completion, examples and
flags in help, strict JSON, full-precision numbers, CSV structs as JSON, folders explained, devices
named by compare, and rm / tag for housekeeping."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import duckdb
import pytest

from tests.conftest import TRACES, run_cli
from tracelake import __version__

COMMANDS = ("ingest", "analyze", "platforms", "build", "sql", "traces", "dashboard", "compare", "rm", "tag", "export", "help")
H100_BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
MI300_BERT = TRACES / "mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"tracelake {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_short_help_with_an_example_and_flags_without_types(command: str) -> None:
    result = run_cli(command, "-h", env={"COLUMNS": "160"})
    assert result.returncode == 0, result.stderr
    assert f"tracelake {command}" in result.stdout
    assert "Example: tracelake " in result.stdout
    assert "<bool>" not in result.stdout  # a flag takes no value


def test_help_command_shows_a_commands_help_and_the_list() -> None:
    one = run_cli("help", "compare", env={"COLUMNS": "160"})
    assert one.returncode == 0, one.stderr
    assert "Usage: tracelake compare" in one.stdout
    # a default is shown as the value it is, not as where it is set
    assert "(default: 5)" in one.stdout and "settings.py" not in one.stdout
    listed = run_cli("help")
    assert listed.returncode == 0
    assert all(command in listed.stdout for command in COMMANDS)


def test_debug_is_accepted_after_the_command(tmp_path: Path) -> None:
    quiet = run_cli("traces", "--warehouse", str(tmp_path / "none"))
    assert quiet.returncode == 2 and quiet.stderr.count("\n") == 1 and "Traceback" not in quiet.stderr
    loud = run_cli("traces", "--warehouse", str(tmp_path / "none"), "--debug")
    assert loud.returncode != 0
    assert "Traceback" in loud.stderr and "WarehouseError" in loud.stderr


def test_traces_of_an_empty_warehouse_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    folder.mkdir()
    duckdb.connect(str(folder / "warehouse.duckdb")).close()  # a database file, no traces
    result = run_cli("traces", "--warehouse", str(folder))
    assert result.returncode == 2
    assert result.stderr.strip() == (f"tracelake: error: warehouse {folder.resolve()} holds no traces yet; run "
                                     f"`tracelake ingest TRACE --warehouse {folder.resolve()}` first")


def test_shell_completion_completes_commands() -> None:
    script = run_cli("--show-completion", "bash", env={"SHELL": "/bin/bash"})
    assert script.returncode == 0, script.stderr
    assert "complete" in script.stdout and "tracelake" in script.stdout.lower()
    words = run_cli(env={"_TRACELAKE_COMPLETE": "complete_bash", "COMP_WORDS": "tracelake an", "COMP_CWORD": "1"})
    assert "analyze" in words.stdout


def test_sql_json_is_strict_and_tables_keep_every_digit(small_warehouse: Path) -> None:
    query = ("select 'nan'::double as not_a_number, [1.5, 'inf'::double] as values, "
             "1419120000000.125::double as ts_us, {'a': 1, 'b': [2, 3]} as s")
    as_json = run_cli("sql", query, "--format", "json", "--warehouse", str(small_warehouse))
    assert as_json.returncode == 0, as_json.stderr
    assert "NaN" not in as_json.stdout and "Infinity" not in as_json.stdout
    rows = json.loads(as_json.stdout)
    assert rows == [{"not_a_number": None, "values": [1.5, None], "ts_us": 1419120000000.125, "s": {"a": 1, "b": [2, 3]}}]
    table = run_cli("sql", query, "--warehouse", str(small_warehouse))
    assert "1419120000000.125" in table.stdout and "e+12" not in table.stdout
    as_csv = run_cli("sql", query, "--format", "csv", "--warehouse", str(small_warehouse))
    record = next(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert json.loads(record["s"]) == {"a": 1, "b": [2, 3]}
    assert json.loads(record["values"]) == [1.5, None]


def test_compare_names_both_devices_and_warns_when_they_differ(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    result = run_cli("compare", str(H100_BERT), str(MI300_BERT), "--warehouse", str(folder))
    assert result.returncode in (0, 1), result.stderr
    assert "| Device | NVIDIA H100" in result.stdout and "MI300X" in result.stdout
    assert "warning: the baseline ran on NVIDIA H100" in result.stderr and "hardware" in result.stderr
    as_json = json.loads(run_cli("compare", str(H100_BERT), str(MI300_BERT), "--warehouse", str(folder),
                                 "--format", "json").stdout)["pairs"][0]["verdict"]
    assert as_json["baseline"]["devices"] != as_json["candidate"]["devices"]
    same = run_cli("compare", str(H100_BERT), str(H100_BERT), "--warehouse", str(folder))
    assert "warning:" not in same.stderr


def test_tag_sets_and_removes_tags_and_rm_takes_traces_out(tmp_path: Path) -> None:
    folder = tmp_path / "wh"
    assert run_cli("ingest", str(H100_BERT), str(MI300_BERT), "--warehouse", str(folder), "--quiet").returncode == 0
    tagged = run_cli("tag", str(H100_BERT), "model=bert", "run=r1", "--warehouse", str(folder))
    assert tagged.returncode == 0, tagged.stderr
    assert "tags updated" in tagged.stdout
    runs = json.loads(run_cli("sql", "select model, run from runs where model is not null", "--format", "json",
                              "--warehouse", str(folder)).stdout)
    assert runs == [{"model": "bert", "run": "r1"}]
    assert run_cli("tag", "model=bert", "--remove", "run", "--warehouse", str(folder)).returncode == 0
    runs = json.loads(run_cli("sql", "select model, run from runs where model is not null", "--format", "json",
                              "--warehouse", str(folder)).stdout)
    assert runs == [{"model": "bert", "run": None}]
    nothing = run_cli("tag", "model=bert", "--warehouse", str(folder))
    assert nothing.returncode == 2 and "KEY=VALUE" in nothing.stderr

    dry = run_cli("rm", "model=bert", "--dry-run", "--warehouse", str(folder))
    assert dry.returncode == 0 and dry.stdout.startswith("would remove")
    removed = run_cli("rm", "model=bert", "--warehouse", str(folder))
    assert removed.returncode == 0, removed.stderr
    trace_id = removed.stdout.split()[1]
    counts = json.loads(run_cli(
        "sql", f"select (select count(*) from traces) as traces, (select count(*) from kernels where trace_id = '{trace_id}') "
        "as kernels, (select count(*) from gpu_timeline) as timelines", "--format", "json", "--warehouse", str(folder)).stdout)
    assert counts == [{"traces": 1, "kernels": 0, "timelines": 1}]
    assert not any(p.name.endswith(trace_id) for p in (folder / "parquet").rglob("trace_id=*"))
    last = run_cli("rm", str(MI300_BERT), "--warehouse", str(folder))
    assert last.returncode == 2 and "every trace" in last.stderr
    unknown = run_cli("rm", "0123456789abcdef", "--warehouse", str(folder))
    assert unknown.returncode == 2 and "no trace" in unknown.stderr
