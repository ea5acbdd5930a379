"""The option types and shared help texts of the `tracelake` command line, and how typer shows them."""

from __future__ import annotations

import difflib
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperOption

try:  # typer >= 0.20 ships its own copy of click
    from typer._click.core import Context
    from typer._click.exceptions import ClickException, NoSuchOption
except ImportError:  # pragma: no cover - older typer uses click itself
    from click.core import Context  # type: ignore[assignment]  # the same class, from click itself
    from click.exceptions import ClickException, NoSuchOption  # type: ignore[assignment]  # the same classes

__all__ = ["ClickException", "show_flags_as_flags", "usage_message"]

# An unknown flag's suggestions: the flags whose names (without the dashes) are at least this similar
# (difflib's ratio). click's own 0.6 counts the shared "--", so it offered --jobs for --bogus (0.44
# without the dashes); a typo (--jbos 0.75, --quite 0.8, --platfrom 0.88) stays above it.
FLAG_SUGGESTION_MIN_SIMILARITY = 0.7


def usage_message(exc: ClickException) -> str:
    """The one line of a usage error; an unknown flag names only the flags close to it, if any."""
    if not isinstance(exc, NoSuchOption):
        return exc.format_message()
    given = exc.option_name.lstrip("-")
    close = [flag for flag in exc.possibilities or []
             if difflib.SequenceMatcher(None, given, flag.lstrip("-")).ratio() >= FLAG_SUGGESTION_MIN_SIMILARITY]
    return f"No such option: {exc.option_name}" + (f" (did you mean {' or '.join(close)}?)" if close else "")


def show_flags_as_flags() -> None:
    """typer prints every option's type in --help, a flag's as `<bool>`; a flag takes no value, so
    its type column stays empty (`--quiet`, not `--quiet <bool>`)."""
    typed = TyperOption.display_type_rich
    if getattr(typed, "flags_as_flags", False):
        return

    def display_type_rich(self: TyperOption, ctx: Context) -> str | None:
        return "" if self.is_flag else typed(self, ctx)

    display_type_rich.flags_as_flags = True  # type: ignore[attr-defined]  # marks the patch as done
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]  # the patch itself


class TableFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class ListFormat(str, Enum):
    table = "table"
    json = "json"


class CompareFormat(str, Enum):
    md = "md"
    json = "json"


class Mode(str, Enum):
    auto = "auto"
    training = "training"
    inference = "inference"
    training_graph = "training-graph"
    inference_graph = "inference-graph"


class Engine(str, Enum):
    local = "local"
    ray = "ray"


EngineOption = Annotated[Engine, typer.Option("--engine", help=(
    "Where the traces are decoded and staged: local (forked workers on this machine) or ray (one task per trace on "
    "a Ray cluster; the warehouse folder and the traces on a file system every node sees: docs/cluster.md)."))]

RayAddressOption = Annotated[str | None, typer.Option("--ray-address", help=(
    "HOST:PORT of the Ray cluster's head for --engine ray (default: a local Ray instance of --jobs CPUs)."),
    show_default=False)]


class AgentsRunner(str, Enum):
    deterministic = "deterministic"
    llm = "llm"


WarehouseOption = Annotated[
    Path | None,
    typer.Option("--warehouse", help="Warehouse folder (default: $TRACELAKE_WAREHOUSE or a per-user data folder)."),
]

CatalogOption = Annotated[
    str | None,
    typer.Option("--catalog", help=("The catalog of a new warehouse, a DuckLake lakehouse: 'local' (a SQLite file in "
                                    "the folder), postgresql://USER@HOST:PORT/DB for writers on many machines, or "
                                    "'classic' for the single-DuckDB-file layout instead, the one `tracelake build` "
                                    "runs dbt on (default: $TRACELAKE_CATALOG, else local)."), show_default=False),
]

STORED_TRACE_HELP = ("a trace file already ingested, a trace id (or a unique prefix of >= 6 hex digits), "
                     "KEY=VALUE[,KEY=VALUE] over model/run/commit/mode/platform and tags, or job:NAME (a job's ranks)")
TRACE_SELECTOR_HELP = ("trace file (.json/.json.gz, ingested if new), trace id (or a unique prefix of >= 6 hex "
                       "digits), or KEY=VALUE[,KEY=VALUE] over model/run/commit/mode/platform and tags "
                       "(several matching traces are pooled as repeated samples); or job:NAME, against another job")


def parse_tags(tags: list[str]) -> dict[str, str]:
    """--tag KEY=VALUE options as a mapping; a mode tag must be one of the run modes."""
    parsed: dict[str, str] = {}
    for tag in tags:
        key, sep, value = tag.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"tag {tag!r} is not KEY=VALUE", param_hint="--tag")
        parsed[key.strip()] = value.strip()
    from tracelake.analyzers.contracts import RUN_MODES  # noqa: PLC0415 - pydantic only when tags are given

    mode = parsed.get("mode")
    if mode is not None and mode not in RUN_MODES:
        raise typer.BadParameter(f"mode={mode!r}: the mode tag is one of {', '.join(RUN_MODES)}", param_hint="--tag")
    return parsed
