"""Issue 28, friction 10, on the command line: an unknown flag is answered with the flags close to it
(none when none is), and `rm --dry-run` shows what it would remove as `traces` lists it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli

BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _data_files(warehouse: Path) -> dict[str, str]:
    """The warehouse's files but its lock files (a read leaves the readers' lock file)."""
    return {name: digest for name, digest in snapshot(warehouse).items() if not Path(name).name.startswith(".")}


def _usage_error(*args: str) -> str:
    result = run_cli(*args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr.strip()


def test_an_unknown_flag_suggests_only_flags_close_to_it() -> None:
    # click offered --jobs for --bogus (its similarity counts the shared "--")
    assert _usage_error("--bogus") == "tracelake: usage error: No such option: --bogus"
    assert _usage_error("ingest", "--bogus", str(BERT)) == "tracelake: usage error: No such option: --bogus"
    assert _usage_error("analyze", "--jbos", "2", str(BERT)).endswith("No such option: --jbos (did you mean --jobs?)")
    assert _usage_error("ingest", "--quite", str(BERT)).endswith("(did you mean --quiet?)")
    assert _usage_error("rm", "--dryrun", "x").endswith("(did you mean --dry-run?)")
    assert _usage_error("sql", "--fromat", "json", "select 1").endswith("(did you mean --format?)")


def test_rm_dry_run_lists_what_it_would_remove_as_traces_does(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    for trace, run in ((BERT, "r1"), (SMALL_TRACE, "r2")):
        made = run_cli("ingest", str(trace), "--warehouse", str(warehouse), "--tag", "model=bert", "--tag", f"run={run}",
                       "--quiet")
        assert made.returncode == 0, made.stderr
    before = _data_files(warehouse)
    dry = run_cli("rm", "model=bert,run=r1", "--dry-run", "--warehouse", str(warehouse))
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    size_mb = BERT.stat().st_size / 1e6
    assert lines[0] == f"would remove 1 trace ({size_mb:.2f} MB of trace files); nothing was changed:"
    header, row = lines[1].split(), lines[3]
    assert header == ["trace_id", "file_name", "device_name", "tags", "file_mb", "event_count", "ingested_at"]
    assert BERT.name in row and "NVIDIA H100 80GB HBM3" in row and f"{size_mb:.2f}" in row
    assert "model" in row and "r1" in row and "r2" not in dry.stdout
    assert lines[-1] == "(1 row)"
    assert _data_files(warehouse) == before  # nothing changed
    listed = json.loads(run_cli("traces", "--warehouse", str(warehouse), "--format", "json").stdout)
    assert len(listed) == 2
    removed = run_cli("rm", "model=bert,run=r1", "--warehouse", str(warehouse))
    assert removed.returncode == 0 and removed.stdout.startswith("removed ") and row.split()[0] in removed.stdout
