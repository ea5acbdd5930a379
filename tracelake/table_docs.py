"""The documentation of the public tables (the `main` schema): each table's and column's
description from the dbt project's yml files, shipped with the compiled plans as
tracelake/compiled/docs.json so an installed wheel (which has no yml) can still say what a column
means. Written by tracelake/plan_compiler.py from dbt's manifest; read by `tracelake mcp`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from tracelake.config import SHIPPED_DIR

DOCS_FILE = "docs.json"
PUBLIC_SCHEMA = "main"


class TableDoc(msgspec.Struct, frozen=True):
    name: str
    description: str
    columns: dict[str, str]  # column name -> its description, in the yml's order


def _doc(entry: dict[str, Any]) -> TableDoc:
    columns = {name: " ".join(str(column.get("description") or "").split())
               for name, column in (entry.get("columns") or {}).items()}
    return TableDoc(entry["name"], " ".join(str(entry.get("description") or "").split()), columns)


def docs_from_manifest(manifest: dict[str, Any]) -> list[TableDoc]:
    """The documented public tables of a dbt manifest: models and seeds built in the public schema,
    and the sources that live there (the analysis tables `analyze` writes), by name."""
    entries = [node for node in manifest["nodes"].values()
               if node["resource_type"] in ("model", "seed") and node["schema"] == PUBLIC_SCHEMA]
    entries += [source for source in manifest["sources"].values() if source["schema"] == PUBLIC_SCHEMA]
    return sorted((_doc(entry) for entry in entries), key=lambda doc: doc.name)


def write_docs(folder: Path, docs: list[TableDoc]) -> None:
    (folder / DOCS_FILE).write_bytes(msgspec.json.format(msgspec.json.encode(docs), indent=1) + b"\n")


def read_docs(folder: Path = SHIPPED_DIR) -> dict[str, TableDoc]:
    """The shipped documentation by table name; empty when none was shipped (an older plan)."""
    try:
        docs: list[TableDoc] = msgspec.json.decode((folder / DOCS_FILE).read_bytes(), type=list[TableDoc])
    except FileNotFoundError:
        return {}
    return {doc.name: doc for doc in docs}
