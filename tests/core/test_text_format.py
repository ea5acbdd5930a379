"""The one-helper-per-concept modules: text formatting, SQL quoting and confidence."""

from __future__ import annotations

import math

from tracelake.analyzers.confidence import at_most, confidence_from_quality, lowered
from tracelake.core.sql_text import inline_trace_id, sql_identifier, sql_literal, sql_literal_or_null
from tracelake.core.text_format import (
    EMPTY,
    bytes_text,
    clip,
    finite,
    ms_text,
    one_line,
    percent_text,
    signed_ms_text,
    signed_percent_text,
)


def test_clip_keeps_short_text_and_marks_a_cut():
    assert clip("aten::mm", 10) == "aten::mm"
    assert clip("abcdefghij", 10) == "abcdefghij"
    assert clip("abcdefghijk", 10) == "abcdefg..."
    assert clip("abcd   efghijk", 10) == "abcd   ..."
    assert clip("abcd   efghijk", 10, strip_end=True) == "abcd..."


def test_one_line_folds_whitespace_and_replaces_controls():
    assert one_line("  a\n\tb \x00c ") == "a b \ufffdc"
    assert one_line(None) == ""


def test_finite_refuses_what_is_no_number():
    assert finite("1.5") == 1.5
    assert finite(3) == 3.0
    assert all(finite(v) is None for v in (None, True, "x", math.nan, math.inf, [1]))


def test_number_texts():
    assert ms_text(1234.56789) == "1,234.568"
    assert percent_text(12.345) == "12.3"
    assert percent_text(0.01) == "<0.1" and percent_text(-0.01) == ">-0.1" and percent_text(0) == "0.0"
    assert signed_ms_text(-0.5) == "-0.500" and signed_percent_text(2) == "+2.0"
    assert {ms_text(None), percent_text("n/a"), signed_ms_text(math.nan), signed_percent_text(None)} == {EMPTY}


def test_sql_literals():
    assert sql_literal("it's") == "'it''s'"
    assert sql_literal_or_null(None) == "null" and sql_literal_or_null("a") == "'a'"
    assert sql_identifier('my "table"') == '"my ""table"""'
    assert inline_trace_id(" select 1 where trace_id = ? and x = ? ", "t'1") == \
        "select 1 where trace_id = 't''1' and x = ?"


def test_confidence_is_lowered_one_way():
    assert lowered("high") == "medium" and lowered("high", 2) == "low" and lowered("low", 5) == "low"
    assert at_most("high", "medium") == "medium" and at_most("low", "medium") == "low"
    verdicts = {"a": "warn", "b": "warn", "c": "fail", "d": "pass"}
    assert confidence_from_quality("high", verdicts, ("a",)) == "medium"
    assert confidence_from_quality("high", verdicts, ("a", "b")) == "low"
    assert confidence_from_quality("high", verdicts, ("c", "d")) == "low"
    assert confidence_from_quality("medium", verdicts, ("d", "missing")) == "medium"


def test_sizes_keep_three_digits_from_bytes_to_gigabytes() -> None:
    # the DLRM job's collectives: a 24-element long all-to-all, 6,144 floats, 394,241 floats; TraceLens'
    # 1,632 MB all-gather
    assert bytes_text(192) == "192 B"
    assert bytes_text(24_576) == "24.6 kB"
    assert bytes_text(1_576_964) == "1.58 MB"
    assert bytes_text(1_711_276_032) == "1.71 GB"
    assert bytes_text(None) == bytes_text(float("nan"))
