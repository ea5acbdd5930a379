"""Bad input: one clear line on stderr, exit 2, no traceback, the warehouse byte-identical; or,
for a trace with bad values in it, exit 0 with every dropped, repaired or masked value counted in
`trace_quality`."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import SMALL_TRACE, snapshot
from tests.conftest import TRACES, run_cli
from tracelake.ingest.limits import MAX_TRACE_FILE_BYTES

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
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0  # a copy: its views are re-pointed here
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


# ---- hostile traces (issue 11): read, dropped and counted, or refused in one line ----

SOURCE = json.loads(gzip.decompress(SMALL_TRACE.read_bytes()))
SECRET_VALUES = ("hf_" + "Xy7" * 11 + "Q", "ghp_" + "a1" * 18, "AKIAABCDEFGHIJKLMNOP",
                 "sk-proj-" + "Zx9" * 10, "s3cr3t-db-pass", "abcdefghijklmnopqrstuvwxyz012345")


@pytest.fixture(scope="module")
def hostile_warehouse(small_warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse holding the unmodified small trace; each hostile variant is ingested beside it."""
    folder = tmp_path_factory.mktemp("hostile_wh") / "wh"
    shutil.copytree(small_warehouse, folder)
    return folder


def _variant(tmp_path: Path, mutate, name: str = "variant.json") -> tuple[Path, dict]:
    """The small trace, changed by `mutate(document)` (which may return the file's bytes)."""
    document = json.loads(json.dumps(SOURCE))
    data = mutate(document)
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(document).encode())
    return path, document


def _ingest_ok(warehouse: Path, trace: Path) -> str:
    result = run_cli("ingest", str(trace), "--warehouse", str(warehouse), "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and "Traceback" not in result.stderr
    return hashlib.sha256(trace.read_bytes()).hexdigest()[:16]


def _sql(warehouse: Path, query: str) -> list[dict]:
    result = run_cli("sql", query, "--warehouse", str(warehouse), "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _quality(warehouse: Path, trace_id: str) -> dict[str, dict]:
    rows = _sql(warehouse, f"select check_name, value, verdict, detail from trace_quality where trace_id = '{trace_id}'")
    return {row["check_name"]: row for row in rows}


def _events_of(document: dict, **match: object) -> list[dict]:
    return [e for e in document["traceEvents"] if all(e.get(k) == v for k, v in match.items())]


def test_huge_integers_are_dropped_or_nulled(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> None:
        ops = _events_of(document, cat="cpu_op")
        ops[0]["ts"] = 2**64  # far outside the trace
        ops[1]["dur"] = 2**64  # ends far after it
        ops[2]["dur"] = -(2**70)
        ops[3]["args"]["External id"] = 2**64
        ops[4]["args"]["External id"] = -(2**70)
        ops[5]["pid"] = 2**64  # a pid is text: kept

    trace, _ = _variant(tmp_path, mutate)
    checks = _quality(hostile_warehouse, _ingest_ok(hostile_warehouse, trace))
    dropped = checks["dropped_events"]
    assert dropped["value"] == 3 and dropped["verdict"] == "warn"
    for reason in ("ts_outside_trace_window=1", "ends_after_trace_window=1", "negative_dur=1"):
        assert reason in dropped["detail"]
    assert checks["repaired_values"]["value"] == 2 and "int_out_of_range=2" in checks["repaired_values"]["detail"]


def test_deep_nesting_of_any_depth_is_cut(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> bytes:
        _events_of(document, cat="cpu_op")[0]["args"]["deep"] = "ARGS"
        document["deepMetadata"] = "META"
        text = json.dumps(document).encode()
        return text.replace(b'"ARGS"', b"[" * 10_000 + b"]" * 10_000).replace(b'"META"', b'{"a":' * 100_000 + b"1" + b"}" * 100_000)

    trace, document = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    checks = _quality(hostile_warehouse, trace_id)
    assert checks["dropped_events"]["value"] == 0  # the event keeps everything but the deep value
    assert "nesting_too_deep=2" in checks["repaired_values"]["detail"]
    assert _sql(hostile_warehouse, f"select event_count from traces where trace_id = '{trace_id}'") == [
        {"event_count": len(document["traceEvents"])}]


def test_invalid_utf8_is_replaced(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> bytes:
        _events_of(document, cat="cpu_op")[0]["name"] = "bad_NAME"
        document["traceName"] = "bad_META"
        return json.dumps(document).encode().replace(b"NAME", b"\xff\xfe").replace(b"META", b"\xc3\x28")

    trace, _ = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    assert _sql(hostile_warehouse, f"select name from events where trace_id = '{trace_id}' and name like 'bad_%'") == [
        {"name": "bad_\ufffd\ufffd"}]
    assert "invalid_utf8=3" in _quality(hostile_warehouse, trace_id)["repaired_values"]["detail"]


def test_control_characters_and_any_unicode_stay_data(hostile_warehouse: Path, tmp_path: Path) -> None:
    names = ['<script>alert("x")</script>', "quote ' and \" and \\", "new\nline\ttab", "nul\x00byte", "\u202eRTL \U0001f600",
             "x" * 20_000]

    def mutate(document: dict) -> bytes:
        for event, name in zip(_events_of(document, cat="cpu_op"), names + ["RAW"]):
            event["name"] = name
        return json.dumps(document).encode().replace(b"RAW", b"raw\x01\tbyte")  # not allowed raw in JSON

    trace, _ = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    stored = {row["name"] for row in _sql(hostile_warehouse, f"select name from events where trace_id = '{trace_id}'")}
    assert set(names) | {"raw\x01\tbyte"} <= stored
    assert "control_characters=2" in _quality(hostile_warehouse, trace_id)["repaired_values"]["detail"]


def test_non_finite_numbers_are_dropped_and_counted(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> bytes:
        ops = _events_of(document, cat="cpu_op")
        ops[0]["dur"], ops[1]["ts"], ops[2]["dur"] = float("nan"), float("inf"), float("-inf")
        ops[3]["args"]["External id"] = float("nan")  # an arg: kept as the string "NaN", not an id
        ops[4]["dur"] = "BIG"
        return json.dumps(document).encode().replace(b'"BIG"', b"1e999")

    trace, _ = _variant(tmp_path, mutate)
    checks = _quality(hostile_warehouse, _ingest_ok(hostile_warehouse, trace))
    assert checks["dropped_events"]["value"] == 4
    for reason in ("non_numeric_dur=2", "non_numeric_ts=1", "number_out_of_range=1"):
        assert reason in checks["dropped_events"]["detail"]
    assert "non_finite_numbers=4" in checks["repaired_values"]["detail"]


def test_wrong_json_types_are_dropped_or_nulled(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> None:
        ops = _events_of(document, cat="cpu_op")
        ops[0]["ph"] = 7
        ops[1]["name"] = ["aten::mm"]
        ops[2]["ts"] = "10:00"
        ops[3]["pid"] = {"pid": 1}  # a pid of the wrong type: null, the event stays
        ops[4]["args"] = [1, 2]  # args that are no object: the event stays, without typed args
        ops[5]["args"]["External id"] = "not a number"
        document["traceEvents"] += [5, "event", None, [1, 2]]

    trace, document = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    dropped = _quality(hostile_warehouse, trace_id)["dropped_events"]
    assert dropped["value"] == 7, dropped
    for reason in ("missing_phase=1", "missing_name=1", "non_numeric_ts=1", "not_an_object=4"):
        assert reason in dropped["detail"]
    assert _sql(hostile_warehouse, f"select event_count from traces where trace_id = '{trace_id}'") == [
        {"event_count": len(document["traceEvents"]) - 7}]


def test_malformed_metadata_fields_are_nulled_not_refused(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> None:
        document["distributedInfo"] = {"backend": ["nccl"], "rank": True, "world_size": 2**31}
        document["deviceProperties"] = {"name": "not a list"}
        document["hip_runtime_version"] = [1, 2]

    trace, _ = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    row = _sql(hostile_warehouse, "select distributed_backend, world_size, rank, device_count, distributed_info "
                                  f"from traces where trace_id = '{trace_id}'")[0]
    assert (row["distributed_backend"], row["world_size"], row["rank"], row["device_count"]) == (None, None, None, 0)
    assert json.loads(row["distributed_info"])["world_size"] == 2**31  # the field's JSON is kept as it was
    detail = _quality(hostile_warehouse, trace_id)["repaired_values"]["detail"]
    for field in ("distributedInfo.backend", "distributedInfo.rank", "distributedInfo.world_size", "deviceProperties",
                  "hip_runtime_version"):
        assert f"nulled_{field}=1" in detail


def test_impossible_times_are_dropped_and_the_total_stays_real(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> None:
        kernels = _events_of(document, cat="kernel")
        kernels[0]["ts"] += 1e15  # ~31 years after the rest
        kernels[1]["dur"] = 1e15  # longer than the trace
        _events_of(document, cat="cpu_op")[0]["dur"] = -5.0

    trace, _ = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    dropped = _quality(hostile_warehouse, trace_id)["dropped_events"]
    assert dropped["value"] == 3
    for reason in ("ts_outside_trace_window=1", "ends_after_trace_window=1", "negative_dur=1"):
        assert reason in dropped["detail"]
    original_id = hashlib.sha256(SMALL_TRACE.read_bytes()).hexdigest()[:16]
    totals = {row["trace_id"]: row["total_time_ms"] for row in _sql(
        hostile_warehouse, f"select trace_id, total_time_ms from gpu_timeline_all_events where trace_id in ('{trace_id}', '{original_id}')")}
    assert 0 < totals[trace_id] <= totals[original_id] < 1000


def test_secrets_in_metadata_are_masked(hostile_warehouse: Path, tmp_path: Path) -> None:
    def mutate(document: dict) -> None:
        document["environment"] = {"HF_TOKEN": SECRET_VALUES[0], "GITHUB_TOKEN": SECRET_VALUES[1], "PATH": "/usr/bin",
                                   "TOKENIZERS_PARALLELISM": "false"}
        document["config"] = {"aws": f"key {SECRET_VALUES[2]} in text", "openai": SECRET_VALUES[3],
                              "db": {"password": SECRET_VALUES[4]}, "header": f"Authorization: Bearer {SECRET_VALUES[5]}"}
        document["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1, "store_auth": SECRET_VALUES[5]}

    trace, _ = _variant(tmp_path, mutate)
    trace_id = _ingest_ok(hostile_warehouse, trace)
    assert trace_id == hashlib.sha256(trace.read_bytes()).hexdigest()[:16]  # the id is the file's hash, as before
    stored = json.dumps(_sql(hostile_warehouse, f"select * from raw.trace_files where trace_id = '{trace_id}'"))
    assert not [secret for secret in SECRET_VALUES if secret in stored]
    metadata = json.loads(_sql(hostile_warehouse, f"select trace_metadata from raw.trace_files where trace_id = '{trace_id}'")[0]["trace_metadata"])
    assert metadata["environment"] == {"HF_TOKEN": "***", "GITHUB_TOKEN": "***", "PATH": "/usr/bin", "TOKENIZERS_PARALLELISM": "false"}
    masked = _quality(hostile_warehouse, trace_id)["masked_secrets"]
    assert (masked["value"], masked["verdict"]) == (7, "info")
    # the check names the keys it masked, never their values (issue 28, friction 10)
    assert masked["detail"].endswith("stored as ***, under config.aws, config.db.password, config.header, "
                                     "config.openai, distributedInfo.store_auth and 2 more keys"), masked["detail"]
    assert not [secret for secret in SECRET_VALUES if secret in masked["detail"]]


def _run_with_timeout(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a short timeout: a read that blocks fails the test instead of hanging it."""
    return subprocess.run([sys.executable, "-m", "tracelake", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DO_NOT_TRACK": "1"})


def _unix_socket(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    return server


@pytest.mark.parametrize("kind", ["fifo", "character device", "socket"])
def test_non_regular_file_is_refused_without_reading_it(kind: str, small_warehouse: Path, tmp_path: Path) -> None:
    before = snapshot(small_warehouse)
    server = None
    if kind == "fifo":
        path = tmp_path / "pipe.json"
        os.mkfifo(path)  # nobody writes: opening it for reading would block
    elif kind == "character device":
        path = Path("/dev/zero")  # reading it never ends
    else:
        path = tmp_path / "sock.json"
        server = _unix_socket(path)
    try:
        result = _run_with_timeout("ingest", str(path), "--warehouse", str(small_warehouse))
    finally:
        if server is not None:
            server.close()
    _assert_one_clean_line(result)
    assert {"fifo": "named pipe", "character device": "character device", "socket": "socket"}[kind] in result.stderr
    assert snapshot(small_warehouse) == before


def test_file_above_the_size_limit_is_refused_unread(small_warehouse: Path, tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(MAX_TRACE_FILE_BYTES + 1)  # sparse: no disk used
    result = _run_with_timeout("ingest", str(huge), "--warehouse", str(small_warehouse))
    _assert_one_clean_line(result)
    assert f"{MAX_TRACE_FILE_BYTES + 1:,} bytes" in result.stderr and f"{MAX_TRACE_FILE_BYTES:,} bytes" in result.stderr


def test_gzip_that_expands_above_the_limit_is_refused(small_warehouse: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from tracelake.cli import main
    from tracelake.ingest import reader

    limit = 1 << 20
    monkeypatch.setattr(reader, "MAX_TRACE_JSON_BYTES", limit)  # 4 GiB of JSON would take this test too long
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (8 * limit) + b"]}"))
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(bomb), "--warehouse", str(small_warehouse), "--quiet"])
    stderr = capsys.readouterr().err
    assert done.value.code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert "decompresses to more than 1,048,576 bytes of JSON" in stderr and f"{bomb.stat().st_size:,} bytes" in stderr


def test_folder_search_skips_fifos_devices_and_sockets(hostile_warehouse: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(TRACES / "cpu_only" / "cpu_mlp_training.json.gz", folder / "good.json.gz")
    os.mkfifo(folder / "pipe.json")
    (folder / "zero.json").symlink_to("/dev/zero")
    server = _unix_socket(folder / "sock.json")
    try:
        result = _run_with_timeout("ingest", str(folder), "--warehouse", str(hostile_warehouse))
    finally:
        server.close()
    assert result.returncode == 0, result.stderr
    assert "good.json.gz" in result.stdout and "Traceback" not in result.stderr
