"""How much of the project's SQL lives in dbt and how much in Python strings.

    python bench/sql_census.py [REPO_ROOT]

A Python string counts as SQL when it reads like a statement (select ... from, with ... as,
insert into, create table, delete from, alter table, copy ... to). F-string pieces are joined
first, so a query built over several lines counts once. Lines are non-blank lines."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGES = ("tracelake", "core", "ingest", "analyzers", "agents", "reports")
DBT_FOLDERS = ("models", "macros", "dbt_tests")
SQL_SHAPE = re.compile(
    r"\bselect\b[\s\S]*\bfrom\b|\bwith\b[\s\S]*\bas\s*\(|\binsert\s+into\b|\bcreate\s+(or\s+replace\s+)?(table|view)\b"
    r"|\bdelete\s+from\b|\balter\s+table\b|\bcopy\b[\s\S]*\bto\b",
    re.IGNORECASE)


def _docstring_ids(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _strings(tree: ast.AST) -> list[str]:
    """Every string literal but docstrings, f-strings joined (their formatted parts as `?`)."""
    found: list[str] = []
    inside: set[int] = _docstring_ids(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "?" for v in node.values]
            found.append("".join(parts))
            inside.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            found.append(node.value)
    return found


def census(root: Path) -> dict[str, int]:
    sql_strings = sql_lines = 0
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
            for text in _strings(ast.parse(path.read_text())):
                if SQL_SHAPE.search(text) and len(text) > 20:
                    sql_strings += 1
                    sql_lines += sum(1 for line in text.splitlines() if line.strip())
    dbt_lines = sum(sum(1 for line in p.read_text().splitlines() if line.strip())
                    for folder in DBT_FOLDERS for p in (root / folder).rglob("*.sql"))
    return {"python_sql_strings": sql_strings, "python_sql_lines": sql_lines, "dbt_sql_lines": dbt_lines}


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    counts = census(root)
    share = counts["python_sql_lines"] / max(1, counts["python_sql_lines"] + counts["dbt_sql_lines"])
    print(f"{root}: {counts['python_sql_strings']} SQL strings in Python ({counts['python_sql_lines']} lines), "
          f"{counts['dbt_sql_lines']} lines of dbt SQL; {100 * share:.1f} % of SQL lines outside dbt")


if __name__ == "__main__":
    main()
