"""The SQL of the dbt project keeps one style (../shared/STYLE.md, after dbt Labs' jaffle-shop): plain
whitespace, lower-case keywords, staging and intermediate models named for their layer, staging models
ending `select * from renamed` and marts `select * from final`. A small check instead of a SQL linter:
it reads the files as text, so it needs no dialect and no compile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tracelake.config import PROJECT_ROOT

MODELS = PROJECT_ROOT / "models"
SQL_FILES = sorted(path for folder in ("models", "macros", "dbt_tests") for path in (PROJECT_ROOT / folder).rglob("*.sql"))
KEYWORDS = frozenset("""
    select from where join left right inner outer full cross on using group by order having limit qualify
    as and or not case when then else end with recursive union all distinct over partition window rows
    range preceding following unbounded current row filter in is null between like ilike exists cast
    asc desc nulls true false values except intersect lateral
""".split())
# Jinja, string literals, quoted identifiers and comments: their words are not SQL keywords
NOT_SQL = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}|'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*|/\*.*?\*/", re.S)
WORD = re.compile(r"\b[A-Za-z_]+\b")


def _name(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT))


def _last_line(path: Path) -> str:
    return path.read_text().rstrip().splitlines()[-1]


def test_sql_files_are_found() -> None:
    assert len([path for path in SQL_FILES if MODELS in path.parents]) > 50


@pytest.mark.parametrize("path", SQL_FILES, ids=_name)
def test_whitespace_is_plain(path: Path) -> None:
    raw = path.read_bytes()
    assert b"\t" not in raw and b"\r" not in raw, "tabs or carriage returns"
    lines = raw.decode().split("\n")
    trailing = [number for number, line in enumerate(lines, 1) if line != line.rstrip()]
    assert not trailing, f"trailing spaces on lines {trailing}"
    assert raw.endswith(b"\n") and not raw.endswith(b"\n\n"), "ends with one newline"


@pytest.mark.parametrize("path", SQL_FILES, ids=_name)
def test_keywords_are_lower_case(path: Path) -> None:
    sql = NOT_SQL.sub(" ", path.read_text())
    upper = sorted({word for word in WORD.findall(sql) if word.lower() in KEYWORDS and word != word.lower()})
    assert not upper, f"keywords not in lower case: {upper}"


def test_models_are_named_for_their_layer() -> None:
    misnamed = [_name(p) for p in (MODELS / "staging").glob("*.sql") if not re.fullmatch(r"stg_\w+__\w+", p.stem)]
    misnamed += [_name(p) for p in (MODELS / "intermediate").glob("*.sql") if not p.stem.startswith("int_")]
    assert not misnamed


def test_staging_models_end_with_their_renamed_source() -> None:
    assert [_name(p) for p in (MODELS / "staging").glob("*.sql") if _last_line(p) != "select * from renamed"] == []


def test_marts_end_with_select_from_final() -> None:
    """A mart made by one macro call (the per-agent op tables) ends as the macro does."""
    endings = {_name(p): _last_line(p) for p in (MODELS / "marts").glob("*.sql")}
    assert len(endings) > 20
    odd = {name: last for name, last in endings.items()
           if last != "select * from final" and not re.fullmatch(r"\{\{ \w+\(.*\) \}\}", last)}
    assert odd == {}
