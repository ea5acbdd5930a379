"""Small inputs that used to cost gigabytes, and inputs in the wrong format, through the real CLI.

Each case is generated in a tmp dir and ingested by `tracelake ingest` in a subprocess under an
address-space limit; its peak RSS (from wait4, that child only) must stay within a bound derived
from the input, above the RSS of the same command refusing a 2-byte file (its start-up).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import subprocess
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from tests.conftest import TRACES
from tracelake.cli import main
from tracelake.ingest.event_list import EventList
from tracelake.ingest.limits import (
    EVENT_PIECE_BYTES,
    GZIP_OUTPUT_STEP_BYTES,
    GZIP_RATIO_CHECK_AFTER_BYTES,
    MAX_EVENT_NAME_CHARS,
    MAX_LABEL_CHARS,
    MAX_TRACE_JSON_BYTES_ENV,
    TRACE_WINDOW_SAMPLE_EVENTS,
)
from tracelake.ingest.reader import _gunzip
from tracelake.lakehouse import open_warehouse

MIB = 1 << 20
# Address space for one ingest: DuckDB, Arrow and the decode workers reserve far more than they
# touch; a bomb that inflated what it holds would pass it.
ADDRESS_SPACE_LIMIT = 3 << 30
EVENT = b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1000.0,"dur":5.0,"pid":1,"tid":1,"args":{}}'
SMALL_TRACE = TRACES / "torch_compile_triton" / "trace.json.gz"


@dataclass(frozen=True)
class Run:
    code: int
    stderr: str
    peak_rss_bytes: int


def _ingest(path: Path, warehouse: Path, **env: str) -> Run:
    child = subprocess.Popen(
        ["prlimit", f"--as={ADDRESS_SPACE_LIMIT}", str(Path(sys.executable).parent / "tracelake"), "ingest", str(path),
         "--warehouse", str(warehouse), "--quiet"],  # prlimit sets the limit and execs: wait4 sees tracelake
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "DO_NOT_TRACK": "1", **env},
    )
    assert child.stderr is not None
    stderr = child.stderr.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return Run(child.returncode, stderr, usage.ru_maxrss * 1024)


@pytest.fixture(scope="module")
def startup_rss(tmp_path_factory: pytest.TempPathFactory) -> int:
    """Peak RSS of `tracelake ingest` refusing a file it reads as empty JSON: the command's own."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "t.json").write_bytes(b"{}")
    return _ingest(folder / "t.json", folder / "wh").peak_rss_bytes


def _gzip_members(path: Path, head: bytes, filler: bytes, copies: int, tail: bytes) -> int:
    """A gzip file of `head`, `copies` x `filler` and `tail` (the filler compressed once, its member
    repeated); returns the JSON size it holds."""
    member = gzip.compress(filler, 9)
    with path.open("wb") as out:
        out.write(gzip.compress(head))
        for _ in range(copies):
            out.write(member)
        out.write(gzip.compress(tail))
    return len(head) + copies * len(filler) + len(tail)


def _one_line(run: Run) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


@pytest.mark.parametrize("whitespace_gib", [3.75, 4.75], ids=["under_the_cap", "over_the_cap"])
def test_a_gzip_bomb_is_refused_before_it_is_inflated(tmp_path: Path, startup_rss: int, whitespace_gib: float) -> None:
    """3.75 / 4.75 GiB of whitespace around one event in ~4 MB of gzip: was 8.3 GB peak RSS ingested
    and 8.5 GB in 17 s refused; now refused once 16 MiB of JSON expand past the ratio."""
    path = tmp_path / "bomb.json.gz"
    json_bytes = _gzip_members(path, b'{"traceEvents":[' + EVENT, b" " * (16 * MIB), int(whitespace_gib * 64), b"]}")
    run = _ingest(path, tmp_path / "wh")
    assert run.code == 2
    assert "decompression bomb" in _one_line(run)
    # the JSON out before the check and one output step past it, twice (the buffer grows by
    # reallocation), and the compressed file
    allowed = 2 * (GZIP_RATIO_CHECK_AFTER_BYTES + GZIP_OUTPUT_STEP_BYTES) + path.stat().st_size
    assert run.peak_rss_bytes - startup_rss < allowed, (run.peak_rss_bytes, startup_rss, json_bytes)


def test_gzip_json_over_the_cap_is_refused_without_inflating_past_it(tmp_path: Path, startup_rss: int) -> None:
    """128 MiB of trace-like JSON (expanding ~30x, like a real trace) over a JSON cap lowered to
    4 MiB: refused when the output passes the cap, never holding the rest."""
    cap = 4 * MIB
    events = b"".join(b"," + EVENT.replace(b"1000.0", str(1000 + i * 7.25).encode()) for i in range(45_000))
    path = tmp_path / "big.json.gz"
    json_bytes = _gzip_members(path, b'{"traceEvents":[' + EVENT, events, 128 * MIB // len(events), b"]}")
    run = _ingest(path, tmp_path / "wh", **{MAX_TRACE_JSON_BYTES_ENV: str(cap)})
    assert run.code == 2
    assert f"decompresses to more than {cap:,} bytes" in _one_line(run)
    assert run.peak_rss_bytes - startup_rss < json_bytes // 4, (run.peak_rss_bytes, startup_rss)


def test_every_real_trace_is_within_the_expansion_ratio() -> None:
    """The ratio limit holds no real trace back (tests/data: 10.8-21.1x)."""
    traces = sorted(TRACES.parent.rglob("*.json.gz"))
    assert len(traces) > 10
    for path in traces:
        data = path.read_bytes()
        assert len(_gunzip(path, data)) == len(gzip.decompress(data)), path


def _utf(text: str, codec: str) -> bytes:
    return text.encode(codec)


TRACE_TEXT = '{"traceEvents": [' + EVENT.decode() + "]}"


def _zip(text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("trace.json", text)
    return buffer.getvalue()


FORMATS = {
    "zip": (_zip(TRACE_TEXT), "a zip archive: unzip it first"),
    "bzip2": (bz2.compress(TRACE_TEXT.encode()), "bzip2 data: decompress it first"),
    "xz": (lzma.compress(TRACE_TEXT.encode()), "xz data: decompress it first"),
    "lzma": (lzma.compress(TRACE_TEXT.encode(), format=lzma.FORMAT_ALONE), "lzma data: decompress it first"),
    "zstd": (b"\x28\xb5\x2f\xfd\x04\x58" + b"\x00" * 32, "zstd data: decompress it first"),
    "utf16_bom": (_utf(TRACE_TEXT, "utf-16"), "UTF-16 text: TraceLake reads UTF-8 JSON"),
    "utf16le": (_utf(TRACE_TEXT, "utf-16-le"), "UTF-16 text: TraceLake reads UTF-8 JSON"),
    "utf16be": (_utf(TRACE_TEXT, "utf-16-be"), "UTF-16 text: TraceLake reads UTF-8 JSON"),
    "utf32_bom": (_utf(TRACE_TEXT, "utf-32"), "UTF-32 text: TraceLake reads UTF-8 JSON"),
    "utf32le": (_utf(TRACE_TEXT, "utf-32-le"), "UTF-32 text: TraceLake reads UTF-8 JSON"),
    "utf32be": (_utf(TRACE_TEXT, "utf-32-be"), "UTF-32 text: TraceLake reads UTF-8 JSON"),
}


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_other_formats_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, suffix: str) -> None:
    """Zip, bzip2, xz, lzma, zstd and UTF-16/32 (with or without a BOM), plain or inside gzip."""
    content, says = FORMATS[name]
    path = tmp_path / f"t{suffix}"
    path.write_bytes(gzip.compress(content) if suffix == ".json.gz" else content)
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(path), "--warehouse", str(tmp_path / "wh"), "--quiet"])
    assert done.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and says in error, error
    assert "invalid character" not in error


def test_long_process_and_thread_names_are_clipped_once_at_ingest(tmp_path: Path, startup_rss: int) -> None:
    """100 KB process, thread and nn.Module names and a 40,000-character kernel name on a small real
    trace: the probe's 124 KB trace took 10.7 GB and 30 s, and a long kernel name was copied onto each op
    signature it serves (op_perf_kernels); each is now clipped and counted, and memory stays near a
    normal ingest."""
    doc = json.loads(gzip.decompress(SMALL_TRACE.read_bytes()))
    huge = "n" * 100_000
    long_labels = 0
    for event in doc["traceEvents"]:
        if event.get("ph") == "M" and event.get("name") in ("process_name", "thread_name", "process_labels"):
            event["args"]["labels" if event["name"] == "process_labels" else "name"] = huge
            long_labels += 1
    first_op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    doc["traceEvents"].append({**first_op, "cat": "python_function", "name": "nn.Module: " + huge,
                               "dur": first_op["dur"] + 2, "ts": first_op["ts"] - 1, "args": {}})
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    kernel["name"] = "k" * (2 * MAX_EVENT_NAME_CHARS)
    path = tmp_path / "names.json"
    path.write_text(json.dumps(doc))
    normal = _ingest(SMALL_TRACE, tmp_path / "normal")
    run = _ingest(path, tmp_path / "wh")
    assert run.code == 0, run.stderr
    # the names held once per table that keeps them (a few dozen), never once per row, on top of what
    # the same trace with short names takes
    assert run.peak_rss_bytes < normal.peak_rss_bytes + 64 * path.stat().st_size, (run, normal, startup_rss)
    with open_warehouse(tmp_path / "wh").connect_read_only() as db:
        check = db.sql("select value, verdict from trace_quality where check_name = 'clipped_labels'").fetchall()
        longest = db.sql("select max(length(thread_name)), max(length(process_name)) from op_perf_instances").fetchall()[0]
        modules = db.sql("select max(length(name)) from events where name like 'nn.Module: %'").fetchall()[0]
        kernel_names = db.sql("select max(length(kernel_name)) from op_perf_kernels").fetchall()[0][0]
        repaired = db.sql("select detail from trace_quality where check_name = 'repaired_values'").fetchall()
    assert check == [(float(long_labels + 1), "warn")]
    assert longest is not None and all(v is None or v <= MAX_LABEL_CHARS + 3 for v in longest)
    assert modules is not None and modules[0] <= len("nn.Module: ") + MAX_LABEL_CHARS + 3
    assert kernel_names <= MAX_EVENT_NAME_CHARS + 3 and "clipped_names=1" in repaired[0][0]


def test_a_json_bomb_in_the_ratio_check_is_never_refused_below_its_floor() -> None:
    """Tiny files compress far better than traces; below GZIP_RATIO_CHECK_AFTER_BYTES they pass."""
    data = b" " * (GZIP_RATIO_CHECK_AFTER_BYTES - 1)
    assert _gunzip(Path("t.json.gz"), zlib.compress(data, 9, wbits=31)) == data


def _empty_events(path: Path, count: int) -> None:
    with path.open("wb") as out:
        out.write(b'{"traceEvents":[' + EVENT + b",{}" * count + b"]}")


def test_empty_events_are_never_held_as_objects_en_masse(tmp_path: Path) -> None:
    """`{}` x N around one event: the event list was decoded into one object per event (30 M: 1.85 GB
    peak, ~56 bytes per event); now it is held as its JSON text, decoded piece by piece, so each
    extra empty event costs about its own 3 bytes of JSON (the bound leaves room for the warehouse
    build's own variation)."""
    small, large = 1_000_000, 5_000_000
    peaks = {}
    for count in (small, large):
        path = tmp_path / f"empty_{count}.json"
        _empty_events(path, count)
        run = _ingest(path, tmp_path / f"wh_{count}")
        assert run.code == 0, run.stderr
        peaks[count] = run.peak_rss_bytes
        path.unlink()
    per_event = (peaks[large] - peaks[small]) / (large - small)
    assert per_event < 16, peaks  # its 3 bytes of JSON and decode buffers; was ~56 (one object each)


def test_the_event_list_splits_only_between_events() -> None:
    """Gaps that look like `},{` inside strings (one of them 3 MiB long) and inside nested args
    never split an event: every event and every range reads as a whole-list decode does."""
    events = []
    for i in range(40_000):
        name = "x},{y" * (i % 7) + ("}, {" * 700_000 if i == 20_000 else "")
        events.append({"ph": "X", "name": name, "ts": i, "args": {"nested": [{}, {"a": "},{"}] * (i % 3)}})
    events.append({})
    text = json.dumps(events).encode()
    whole: msgspec.json.Decoder[list[msgspec.Raw]] = msgspec.json.Decoder(list[msgspec.Raw])
    expected = [bytes(raw) for raw in whole.decode(text)]
    listed = EventList(memoryview(text))
    assert len(text) > 4 * EVENT_PIECE_BYTES and len(listed._first) > 2
    assert len(listed) == len(expected)
    assert [bytes(raw) for raw in listed] == expected
    for start, stop in ((0, 1), (19_990, 20_010), (7_777, 33_333), (40_000, 40_001)):
        assert [bytes(raw) for raw in listed[start:stop]] == expected[start:stop]
    sample = [bytes(raw) for raw in listed.window_sample]  # every 2**k-th event, 5,000 to 9,999 of them
    assert TRACE_WINDOW_SAMPLE_EVENTS <= len(sample) < 2 * TRACE_WINDOW_SAMPLE_EVENTS
    assert sample in [expected[:: 2**k] for k in range(8)]
