"""Keep ad-hoc SQL read-only: `tracelake sql` (and any read handle from the same connection
factory) can read the warehouse and nothing else, and can change nothing.

Two layers, each covering what the other cannot:

- `lock_down` sets the connection's DuckDB instance so that the engine itself refuses the rest:
  files are reachable only under `<warehouse>/parquet` (what the raw views read), nothing from
  the network, no extension installed or loaded, no Python variables as tables, spilled data
  outside the warehouse, and the configuration locked so no statement can undo any of it.
- `check_query` parses the SQL and lets through only statements that read (SELECT and its
  spellings DESCRIBE / SHOW / SUMMARIZE / FROM / VALUES / PIVOT ... IN, EXPLAIN of one, a few
  PRAGMAs that list things). The settings alone would still let COPY ... TO write into the
  warehouse's own Parquet folder (the one folder reads need), and would let CHECKPOINT or a
  table function that manages state run, so those are refused by kind before anything runs.

Verified against DuckDB 2.0.1 (tests/cli/test_sql_guard.py); the setting names and their order
matter: `allowed_directories` can only be set while external access is still on.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelake.core.errors import TraceLakeError
from tracelake.core.sql_text import sql_literal

if TYPE_CHECKING:
    import duckdb

PARQUET_FOLDER = "parquet"  # <warehouse>/parquet: what the raw views read (tracelake/warehouse.py)
READS_ONLY_HINT = "only SELECT, DESCRIBE, SHOW, SUMMARIZE and EXPLAIN run here"
# The secret store of a lake on a PostgreSQL catalog (tracelake/lake_writers.py): persistent secrets
# stay on there (the postgres extension needs the store), pointed at a folder that never exists.
NO_SECRET_DIRECTORY = "/nonexistent/tracelake-no-duckdb-secrets"
EXPORT_HINT = "export a result with `tracelake sql QUERY --format csv > FILE` (or --format json)"

# Filesystems that reach the network (httpfs, azure). With external access off DuckDB already
# refuses every URL, and no extension can be loaded; named too, in case one was loaded before.
NETWORK_FILESYSTEMS = ("HTTPFileSystem", "S3FileSystem", "HuggingFaceFileSystem",
                       "AzureBlobStorageFileSystem", "AzureDfsStorageFileSystem")

# Set in this order before the external-access switch; each is a plain `SET name = value`.
LOCKED_SETTINGS: tuple[tuple[str, str], ...] = (
    # `select * from os` would scan the CLI's Python objects. Per connection, and moot with external
    # access off (DuckDB then refuses replacement scans on every connection), so python_scan_all_frames
    # (which frames a scan searches) is left alone.
    ("python_enable_replacements", "false"),
    ("autoinstall_known_extensions", "false"),  # read_csv('https://...') would download httpfs
    ("autoload_known_extensions", "false"),
    ("allow_community_extensions", "false"),
    ("allow_persistent_secrets", "false"),  # CREATE PERSISTENT SECRET writes under ~/.duckdb
    ("disabled_filesystems", "'" + ",".join(NETWORK_FILESYSTEMS) + "'"),
)

# PRAGMAs (statement type PRAGMA) that only list or describe; every other PRAGMA is refused, as
# are the ones that set a value (`pragma threads = 1` parses as SET).
READ_PRAGMAS = frozenset({
    "table_info", "show_tables", "show_tables_expanded", "show_databases", "database_size",
    "storage_info", "metadata_info", "version", "platform", "user_agent", "collations", "functions",
})

# Table functions a SELECT may call that change state rather than read it (DuckDB 2.0.1's list).
# The locked settings already stop the configuration and logging ones; refusing them by name
# gives a clear message, and `query` / `json_execute_serialized_sql` would hide SQL from this check.
REFUSED_TABLE_FUNCTIONS = frozenset({
    "checkpoint", "force_checkpoint",
    "enable_logging", "disable_logging", "truncate_duckdb_logs", "enable_profiling", "disable_profiling",
    "add_grammar_extension", "remove_grammar_extension",
    "register_external_resource_type", "register_external_resource", "create_external_resource",
    "deregister_external_resource", "destroy_external_resource",
    "query", "json_execute_serialized_sql",
})

_LEADING_COMMENTS = r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*"
_FIRST_WORDS = re.compile(_LEADING_COMMENTS + r"(\w+)(?:\s+(\w+))?", re.DOTALL)
# EXPLAIN [ANALYZE] [(options)] statement
_EXPLAIN = re.compile(_LEADING_COMMENTS + r"explain\s+(?:analy[sz]e\b\s*)?", re.DOTALL | re.IGNORECASE)
_EXPLAIN_OPTIONS = re.compile(r"\((?:[^()']|'[^']*')*\)\s*", re.DOTALL)

# Per statement type: what is refused (by the statement's first keyword where types are shared)
# and what to do instead.
_REFUSALS: dict[str, tuple[str, str]] = {
    "COPY": ("COPY ... TO / FROM is refused", EXPORT_HINT),
    "EXPORT": ("EXPORT DATABASE is refused", EXPORT_HINT),
    "ATTACH": ("ATTACH is refused",
               "tracelake sql reads this warehouse only; open other databases with duckdb itself"),
    "DETACH": ("DETACH is refused", "tracelake sql reads this warehouse only"),
    "LOAD": ("LOAD is refused", "tracelake sql runs with the extensions it ships (parquet, json, icu) and no network"),
    "SET": ("changing settings (SET / RESET / PRAGMA name = value / USE) is refused",
            "the settings are locked; write values into the query and qualify names (schema.table)"),
    "CREATE": ("CREATE is refused", "name intermediate results with a WITH clause instead"),
    "DROP": ("DROP is refused", "the warehouse changes only through `tracelake ingest` and `tracelake build`"),
    "ALTER": ("ALTER / COMMENT ON is refused",
              "the warehouse changes only through `tracelake ingest` and `tracelake build`"),
    "INSERT": ("INSERT is refused", "the warehouse changes only through `tracelake ingest`"),
    "UPDATE": ("UPDATE is refused", "the warehouse changes only through `tracelake ingest`"),
    "DELETE": ("DELETE / TRUNCATE is refused", "the warehouse changes only through `tracelake ingest`"),
    "MERGE_INTO": ("MERGE INTO is refused", "the warehouse changes only through `tracelake ingest`"),
    "VACUUM": ("VACUUM / ANALYZE is refused", "the warehouse maintains itself on ingest"),
    "TRANSACTION": ("BEGIN / COMMIT / ROLLBACK is refused", "each query runs on its own; leave them out"),
    "PREPARE": ("PREPARE is refused", "write the values into the query"),
    "EXECUTE": ("EXECUTE is refused", "write the values into the query"),
    "MULTI": ("a statement DuckDB runs as several is refused (a PIVOT without an IN list creates a type)",
              "list the values: PIVOT ... ON column IN ('a', 'b') USING ..."),
}


class ReadOnlyQueryError(TraceLakeError):
    """A statement `tracelake sql` refuses because it would change something or reach outside."""

    def __init__(self, what: str, hint: str) -> None:
        super().__init__(f"sql is read-only: {what}; {hint}")


_lock_down_lock = threading.Lock()  # one DuckDB instance is shared by the connections to its file


_GLOB_CHARACTERS = "[*?"


def literal_glob(path: str) -> str:
    """`path` as a DuckDB glob that matches only itself: a warehouse folder named `runs[1]` or
    `a*b` is a name, not a pattern (DuckDB reads `[c]` as the character c)."""
    return "".join(f"[{c}]" if c in _GLOB_CHARACTERS else c for c in path)


def readable_directory(warehouse_root: Path) -> Path:
    """The one folder a locked connection may open files in: the warehouse's Parquet partitions."""
    return warehouse_root / PARQUET_FOLDER


def readable_folder(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The folder `lock_down` let the connection's instance open files in (the classic layout's
    Parquet partitions, a lakehouse's data path); None when the instance is not locked down."""
    if _setting(con, "enable_external_access"):
        return None
    row = con.execute("select current_setting('allowed_directories'), current_setting('temp_directory')").fetchone()
    allowed, spill = (row[0] or [], str(row[1]).rstrip("/")) if row else ([], "")
    folders = [str(a) for a in allowed if str(a).rstrip("/") != spill]
    return Path(min(folders, key=len)) if folders else None  # the folder, not its literal-glob spelling


def lock_down(con: duckdb.DuckDBPyConnection, warehouse_root: Path, readable: Path | None = None) -> None:
    """Lock a freshly opened read-only connection's DuckDB instance (see the module docstring);
    files may be opened only in `readable` (default: the warehouse's Parquet partitions).

    Safe to call again, on this or another connection to the same instance (DuckDB shares one
    instance between the connections a process opens to a file): a locked instance is checked
    and left as it is.
    """
    with _lock_down_lock:
        if _setting(con, "lock_configuration"):
            # python_enable_replacements is per connection and cannot be set once locked; with
            # external access off DuckDB refuses replacement scans on every connection anyway
            if _setting(con, "enable_external_access"):
                raise TraceLakeError(f"the DuckDB connection to {warehouse_root} was locked with other settings "
                                     "than tracelake's read-only ones; open it through Warehouse.connect_read_only")
            return
        for name, value in LOCKED_SETTINGS:
            if name == "allow_persistent_secrets" and (not _setting(con, name) or _no_secret_store(con)):
                continue  # set at connect (a lakehouse's attach uses the secret manager, which freezes it)
            con.execute(f"set {name} = {value}")
        if _setting(con, "enable_external_access"):
            # spilled intermediates would land in <warehouse>/warehouse.duckdb.tmp; DuckDB creates
            # this folder only when it spills and removes it when the instance closes
            spill = Path(tempfile.gettempdir()) / f"tracelake-duckdb-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            con.execute(f"set temp_directory = {sql_literal(spill.as_posix())}")
            # symlinked spellings of the folder are fine: DuckDB compares canonical paths
            folder = (readable or readable_directory(warehouse_root)).as_posix().rstrip("/") + "/"
            # the views name the folder as a literal glob (`[*]` for `*`), which DuckDB checks as written
            allowed = sorted({folder, literal_glob(folder)})
            con.execute(f"set allowed_directories = [{', '.join(map(sql_literal, allowed))}]")  # only while access is on
            con.execute("set enable_external_access = false")
        con.execute("set lock_configuration = true")


_REFUSED_FILE = re.compile(r'Cannot access (?:file|directory) "([^"]*)"')
_VIEW_GLOB = re.compile(r"/parquet/\w+/(?:\*|trace_id=[^/]+)/[^/]+\.parquet$")  # what a raw.* view reads


def refused_access(message: str, warehouse_root: Path, readable: Path | None = None) -> ReadOnlyQueryError:
    """The refusal for a DuckDB permission error (a file or URL the locked connection may not open;
    `readable`: the folder it may open, by default the classic layout's Parquet folder)."""
    readable = readable or readable_directory(warehouse_root)
    match = _REFUSED_FILE.search(message)
    target = match.group(1) if match else "a file"
    if re.match(r"^[a-zA-Z][\w+.-]*://", target):
        return ReadOnlyQueryError(f"reading {target} is refused", "tracelake sql reaches no network")
    if _VIEW_GLOB.search(target):
        return ReadOnlyQueryError(f"opening {target} is refused: the warehouse's views point outside {readable}",
                                  f"moved the folder? `tracelake build --warehouse {warehouse_root}` re-points them")
    return ReadOnlyQueryError(f"opening {target} is refused", f"tracelake sql opens files only under {readable}")


def check_query(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise ReadOnlyQueryError unless every statement in `query` only reads. Parse errors are
    DuckDB's (duckdb.ParserException), for the caller to report like any failed query."""
    import duckdb  # noqa: PLC0415 - loaded by now: `con` is a DuckDB connection

    try:
        statements = con.extract_statements(query)
    except duckdb.PermissionException:
        if _first_words(query).startswith("import"):  # DuckDB 1.5 reads IMPORT DATABASE's files as it parses
            raise ReadOnlyQueryError("IMPORT DATABASE is refused", _REFUSALS["INSERT"][1]) from None
        raise
    if not statements:
        raise TraceLakeError("the query has no SQL statement; pass one, e.g. \"select * from traces\"")
    if len(statements) > 1 and _first_words(query).startswith("pivot"):  # DuckDB 1.5 splits it: CREATE TYPE, SELECT
        raise ReadOnlyQueryError(*_REFUSALS["MULTI"])
    for statement in statements:
        try:
            kind = statement.type.name
        except ValueError:  # a statement type the Python binding has no name for (UPDATE EXTENSIONS)
            kind = ""
        if not kind.isidentifier():  # 2.0 raises; 1.5 names it "???"
            raise ReadOnlyQueryError(f"`{_first_words(statement.query)}` is refused", READS_ONLY_HINT)
        _check_statement(con, kind, statement.query)


def _check_statement(con: duckdb.DuckDBPyConnection, kind: str, text: str) -> None:
    first = _first_words(text)
    if kind == "SELECT":
        _check_table_functions(con, text)
    elif kind == "EXPLAIN":
        _check_explained(con, text)
    elif kind == "PRAGMA":
        name = first.split()[1] if first.startswith("pragma ") else ""
        if name not in READ_PRAGMAS:
            if first.startswith("import"):
                raise ReadOnlyQueryError("IMPORT DATABASE is refused", _REFUSALS["INSERT"][1])
            raise ReadOnlyQueryError(f"PRAGMA {name} is refused",
                                     "the PRAGMAs that run here list things: " + ", ".join(sorted(READ_PRAGMAS)))
    elif kind == "CALL":
        if "checkpoint" in first.split():
            raise ReadOnlyQueryError("CHECKPOINT is refused", "the warehouse is read-only here")
        raise ReadOnlyQueryError("CALL is refused", "call a table function as SELECT * FROM name(...)")
    elif kind == "LOAD" and first.split()[0] in ("install", "force"):
        raise ReadOnlyQueryError("INSTALL is refused", _REFUSALS["LOAD"][1])
    else:
        what, hint = _REFUSALS.get(kind, (f"{kind} is refused", READS_ONLY_HINT))
        raise ReadOnlyQueryError(what, hint)


def _check_explained(con: duckdb.DuckDBPyConnection, text: str) -> None:
    """EXPLAIN ANALYZE runs what it explains: allow it over one SELECT only."""
    import duckdb  # noqa: PLC0415 - loaded by now: `con` is a DuckDB connection

    prefix = _EXPLAIN.match(text)
    if prefix is not None:
        rest = text[prefix.end():]
        options = _EXPLAIN_OPTIONS.match(rest)
        # `explain (select 1)` and `explain (format json) select 1` look alike: try both readings
        for candidate in [rest] + ([rest[options.end():]] if options else []):
            try:
                inner = con.extract_statements(candidate)
                inner_kind = inner[0].type.name if len(inner) == 1 else None
            except (duckdb.Error, ValueError):  # a parse error: not this reading
                continue
            if inner_kind == "SELECT":
                _check_table_functions(con, inner[0].query)
                return
    raise ReadOnlyQueryError("EXPLAIN of anything but a SELECT is refused (EXPLAIN ANALYZE runs it)",
                             "explain the SELECT itself")


def _check_table_functions(con: duckdb.DuckDBPyConnection, text: str) -> None:
    serialized = con.execute("select json_serialize_sql(?)", [text]).fetchone()
    tree = json.loads(serialized[0]) if serialized else {"error": True}
    if tree.get("error"):
        raise ReadOnlyQueryError("a SELECT that cannot be checked is refused",
                                 f"DuckDB could not serialize it ({tree.get('error_message', 'no reason given')})")
    functions, paths = _table_functions(tree)
    refused = sorted(functions & REFUSED_TABLE_FUNCTIONS)
    if refused:
        name = refused[0]
        hint = ("run the inner SELECT directly" if name in ("query", "json_execute_serialized_sql")
                else "it changes state rather than reading it")
        raise ReadOnlyQueryError(f"the table function {name}() is refused", hint)
    _check_paths(con, paths)


# Table functions that take file paths (DuckDB 2.0.1: read_parquet / read_csv / read_json* / read_text /
# read_blob, parquet_scan and the other *_scan spellings, parquet_metadata and its kin, glob, sniff_csv).
_FILE_FUNCTION = re.compile(r"^(?:read_\w+|\w+_scan|parquet_\w+|glob|sniff_csv)$")
_URL = re.compile(r"^[a-zA-Z][\w+.-]*://")


def _table_functions(node: object) -> tuple[set[str], list[str]]:
    """The table functions a statement tree calls, and the file paths it names: the positional
    arguments of the file-reading ones and the tables named like files (`from 'x.parquet'`)."""
    found: set[str] = set()
    paths: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "TABLE_FUNCTION" and isinstance(item.get("function"), dict):
                name = str(item["function"].get("function_name", "")).lower()
                found.add(name)
                if _FILE_FUNCTION.match(name):
                    paths += [path for argument in _positional_arguments(item["function"])
                              for path in _literal_paths(name, argument)]
            elif item.get("type") == "BASE_TABLE" and re.search(r"[/.]", str(item.get("table_name", ""))):
                paths.append(str(item["table_name"]))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found, paths


def _positional_arguments(function: dict[str, Any]) -> list[object]:
    """A call's positional argument expressions. DuckDB 2 lists `arguments`, each named or not;
    DuckDB 1.5 lists `children`, a named one written as `name = value`."""
    if "arguments" in function:
        return [argument.get("expression") for argument in function["arguments"] if not argument.get("name")]
    return [child for child in function.get("children", []) if not (
        isinstance(child, dict) and child.get("type") == "COMPARE_EQUAL"
        and isinstance(child.get("left"), dict) and child["left"].get("type") == "COLUMN_REF")]


def _string_constant(expression: dict[str, Any]) -> str | None:
    """The text of a string literal, in DuckDB 2's tree (`literal`) or 1.5's (`value`)."""
    if expression.get("type") != "VALUE_CONSTANT":
        return None
    literal = expression.get("literal")
    if isinstance(literal, dict) and literal.get("kind") == "STRING":
        return str(literal.get("text", ""))
    value = expression.get("value")
    if isinstance(value, dict) and not value.get("is_null") and (value.get("type") or {}).get("id") == "VARCHAR":
        return str(value.get("value", ""))
    return None


def _literal_paths(function: str, expression: object) -> list[str]:
    """The strings of a path argument: a literal or a list of literals. Anything computed is refused:
    its value, and so the file, is known only when DuckDB binds it."""
    if isinstance(expression, dict):
        text = _string_constant(expression)
        if text is not None:
            return [text]
        if expression.get("type") == "FUNCTION" and expression.get("function_name") == "list_value":
            return [p for argument in _positional_arguments(expression) for p in _literal_paths(function, argument)]
    raise ReadOnlyQueryError(f"a computed file path in {function}() is refused",
                             "write the path as a string literal (or a list of them)")


def _check_paths(con: duckdb.DuckDBPyConnection, paths: list[str]) -> None:
    """Refuse a path whose file, resolved (`..`, symbolic links; a glob expanded by DuckDB's own
    rules), leaves the warehouse's Parquet folder. DuckDB's allowed_directories does not suffice:
    it always lets the database file itself be read (`read_blob` of it would show the bytes of
    deleted rows)."""
    if not paths:
        return
    folder = readable_folder(con)
    if folder is None:
        return  # not locked down (an in-memory database of a test): DuckDB's settings alone apply
    readable = os.path.realpath(folder)
    for path in paths:
        if _URL.match(path):
            continue  # refused by DuckDB (no network), with its own message
        files = [path]
        if any(c in path for c in _GLOB_CHARACTERS):
            files = [r[0] for r in con.execute("select file from glob(?)", [path]).fetchall()]
        for file in files:
            resolved = os.path.realpath(file)
            if resolved != readable and not resolved.startswith(readable + os.sep):
                raise ReadOnlyQueryError(f"opening {path} is refused" + (f" (it is {resolved})" if resolved != path else ""),
                                         f"tracelake sql opens files only under {readable}")


def _first_words(text: str) -> str:
    match = _FIRST_WORDS.match(text)
    if match is None:
        return ""
    return " ".join(word.lower() for word in match.groups() if word)


def _no_secret_store(con: duckdb.DuckDBPyConnection) -> bool:
    row = con.execute("select current_setting('secret_directory')").fetchone()
    return bool(row and row[0] == NO_SECRET_DIRECTORY)


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute("select current_setting(?)", [name]).fetchone()
    return bool(row and row[0])


