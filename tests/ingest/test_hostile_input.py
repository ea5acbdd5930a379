"""The pieces of ingest that keep hostile input from crashing it: the JSON repair, the trace
window, the capped gzip read and the secret masking."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest

from tests.conftest import TRACES
from tracelake.core.errors import BadTraceError, NotATraceError
from tracelake.ingest import reader
from tracelake.ingest.decode import trace_window
from tracelake.ingest.json_repair import repair_json, repair_utf8, valid_utf8
from tracelake.ingest.limits import TRACE_WINDOW_MIN_HALF_WIDTH_US
from tracelake.ingest.metadata import decode_metadata
from tracelake.ingest.reader import parse_trace_document, read_trace_bytes


def _repaired(text: bytes, max_depth: int = 64) -> tuple[object, dict[str, int]]:
    data, fixes = repair_json(text, max_depth)
    return msgspec.json.decode(data), dict(fixes)


def test_strings_are_repaired_and_their_text_kept() -> None:
    value, fixes = _repaired(b'{"a": "x\x01y\tz", "b": "\\q", "c": "\\ud800 \\udc00 \\ud83d\\ude00 \\\\ud800", "d": "\\"NaN\\""}')
    assert value == {"a": "x\x01y\tz", "b": "\\q", "c": "\ufffd \ufffd \U0001f600 \\ud800", "d": '"NaN"'}
    assert fixes == {"control_characters": 2, "invalid_escapes": 1, "lone_surrogates": 2}


def test_non_finite_literals_become_strings_outside_strings_only() -> None:
    value, fixes = _repaired(b'{"x": [NaN, -Infinity, Infinity, nan, -inf], "s": "NaN, Infinity", "y": NaN}')
    assert value == {"x": ["NaN", "-Infinity", "Infinity", "nan", "-inf"], "s": "NaN, Infinity", "y": "NaN"}
    assert fixes == {"non_finite_numbers": 6}


def test_containers_below_the_depth_limit_become_null() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    text = b'{"a": ' + deep + b', "s": "[[[[[[", "b": {"c": {"d": {"e": 1}}}, "f": [1, [2]]}'
    value, fixes = _repaired(text, max_depth=3)
    assert value == {"a": [[None]], "s": "[[[[[[", "b": {"c": {"d": None}}, "f": [1, [2]]}
    assert fixes == {"nesting_too_deep": 2}


def test_json_whose_strings_do_not_pair_is_left_alone() -> None:
    assert repair_json(b'{"a": "cut', 64) == (b'{"a": "cut', {})


def test_invalid_utf8_is_found_and_replaced() -> None:
    assert valid_utf8(b"ascii") and valid_utf8("é😀".encode())
    assert not valid_utf8(b"a\xffb") and not valid_utf8(b"\xed\xa0\x80")  # a UTF-8 encoded surrogate
    assert repair_utf8(b"a\xff\xfeb\xc3") == ("a\ufffd\ufffdb\ufffd".encode(), 3)


def test_a_trace_with_all_of_it_still_parses(tmp_path: Path) -> None:
    text = (b'{"traceEvents": [{"ph": "X", "name": "a\xff\x01", "ts": NaN, "dur": 1, "args": {"d": '
            + b"[" * 5000 + b"]" * 5000 + b'}}], "meta": Infinity, "big": 1e999}')
    document = parse_trace_document(tmp_path / "t.json", text)
    assert len(document.raw_events) == 1
    assert document.metadata == {"meta": "Infinity", "big": None}
    assert document.repaired == {"invalid_utf8": 1, "control_characters": 1, "non_finite_numbers": 3,
                                 "nesting_too_deep": 1}


def test_trace_window_holds_while_less_than_half_the_events_are_wrong() -> None:
    good = [msgspec.Raw(b'{"ph": "X", "ts": %d}' % (1_000_000 + i)) for i in range(600)]
    wrong = [msgspec.Raw(b'{"ph": "X", "ts": 1e18}')] * 400 + [msgspec.Raw(b'{"ph": "X", "ts": "x"}'), msgspec.Raw(b"7")]
    window = trace_window(good + wrong)
    assert window is not None
    assert window.start_us <= 1_000_000 and window.end_us >= 1_000_600
    assert window.end_us - window.start_us == pytest.approx(2 * TRACE_WINDOW_MIN_HALF_WIDTH_US)
    assert trace_window([msgspec.Raw(b'{"ph": "M"}')]) is None


def test_every_real_trace_lies_inside_its_window() -> None:
    for trace in sorted(TRACES.rglob("*.json.gz")):
        path = Path(trace)
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        window = trace_window([msgspec.Raw(json.dumps(e).encode()) for e in events])
        timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
        assert window is not None
        assert window.start_us <= min(e["ts"] for e in timed), path
        assert max(e["ts"] + e.get("dur", 0) for e in timed) <= window.end_us, path


def test_gzip_members_are_joined_and_garbage_after_them_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    assert reader._gunzip(path, gzip.compress(b'{"a": ') + b"\x00\x00" + gzip.compress(b"1}")) == b'{"a": 1}'
    with pytest.raises(BadTraceError, match="followed by other bytes"):
        reader._gunzip(path, gzip.compress(b"{}") + b"junk")
    with pytest.raises(BadTraceError, match="truncated"):
        reader._gunzip(path, gzip.compress(b"{}" * 1000)[:-20])


def test_json_above_the_limit_is_refused_while_decompressing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reader, "MAX_TRACE_JSON_BYTES", 1000)
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b" " * 1001))
    with pytest.raises(BadTraceError, match="decompresses to more than 1,000 bytes"):
        read_trace_bytes(path)
    path.write_bytes(gzip.compress(b" " * 999 + b"1"))
    assert read_trace_bytes(path) == b" " * 999 + b"1"


def test_secrets_are_masked_anywhere_in_the_metadata() -> None:
    top = {
        "env": msgspec.Raw(json.dumps({"HF_TOKEN": "hf_abc", "TOKENIZERS_PARALLELISM": "false", "max_tokens": 512,
                                       "auth_enabled": True, "Password": None}).encode()),
        "config": msgspec.Raw(json.dumps([{"url": "https://user:pw@host/x?api_key=123&b=2"},
                                          "Bearer abcdefgh12345", "see sk-ant-abcdefghijklmnopqrstu here"]).encode()),
        "credentials": msgspec.Raw(b'{"a": {"b": "c"}}'),
    }
    metadata = decode_metadata(top)
    assert metadata.values == {
        "env": {"HF_TOKEN": "***", "TOKENIZERS_PARALLELISM": "false", "max_tokens": 512, "auth_enabled": True,
                "Password": None},
        "config": [{"url": "https://***@host/x?***&b=2"}, "***", "see *** here"],
        "credentials": "***",
    }
    assert metadata.masked_secrets == 6
    # the key of each masked value, never the value (a string with two tokens: its key twice)
    assert metadata.masked_keys == ("config[0].url", "config[0].url", "config[1]", "config[2]", "credentials", "env.HF_TOKEN")


def test_a_byte_order_mark_is_dropped_and_a_repaired_list_is_still_no_trace(tmp_path: Path) -> None:
    document = parse_trace_document(tmp_path / "t.json", b'\xef\xbb\xbf{"traceEvents": [{"ph": "i", "ts": 1}]}')
    assert document.repaired == {"byte_order_mark": 1}
    with pytest.raises(NotATraceError):
        parse_trace_document(tmp_path / "t.json", b"[NaN]")
