"""Run the dbt project in process, and compile a warehouse's incremental plan for the ingest fast path.

Importing dbt and parsing the project costs ~2 s, too much for every ingested trace. So after a
full dbt run the incremental models are compiled once more, in incremental mode, with a
placeholder for the new trace ids. Ingest then executes that compiled SQL directly: the SQL is
still dbt's (the models stay the single definition), only the placeholder is filled in. The plan's
schema, its files and its execution live in tracelake/shipped_plan.py.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tracelake import __version__
from tracelake.config import DBT_EXTRA, DBT_PROJECT_DIR, IN_CHECKOUT, PROJECT_ROOT
from tracelake.core.errors import WarehouseError
from tracelake.shipped_plan import (
    NEW_TRACE_IDS_PLACEHOLDER,
    IncrementalPlan,
    PlannedModel,
    shipped_fingerprint,
)
from tracelake.staging import StagingFolder, replace_file

_PROJECT_PARTS = ("dbt_project.yml", "profiles.yml", "models", "macros", "seeds", "dbt_tests")


def project_fingerprint() -> str:
    """A hash of the dbt project's files; without the project (an installed wheel), the fingerprint
    of the plans shipped with the package, which are then the project."""
    if not IN_CHECKOUT:
        try:
            return shipped_fingerprint()
        except (OSError, ValueError):
            raise WarehouseError("this TraceLake installation has neither its dbt project nor the plans compiled "
                                 "from it; reinstall it") from None
    digest = hashlib.sha256(__version__.encode())
    for part in _PROJECT_PARTS:
        base = PROJECT_ROOT / part
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for file in files:
            if file.exists():
                digest.update(str(file.relative_to(PROJECT_ROOT)).encode())
                digest.update(file.read_bytes())
    return digest.hexdigest()


def parse_project(db_path: Path, work_dir: Path) -> Any:
    """The project's parsed manifest, for run_dbt(manifest=) calls to share: a build and the plan's
    compile then parse once (their vars differ, so dbt's partial parsing would parse twice)."""
    return run_dbt(db_path, work_dir, ["parse"])


def parse_cache_path() -> Path:
    """dbt's partial-parse file, shared by every warehouse built from this project version (its
    name carries the project fingerprint, so an edited project gets its own)."""
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "tracelake" / "dbt" / project_fingerprint()[:16] / "partial_parse.msgpack"


DBT_LOG = "dbt.log"
DBT_LOG_KEPT_BYTES = 10 << 20  # the earlier runs' log kept per warehouse: dbt's own rotation size for dbt.log
NodeProgress = Callable[[int, int, str], None]  # (nodes done, nodes in all, the node just done)
_NODE_RESULT_EVENTS = ("LogModelResult", "LogTestResult", "LogSeedResult", "LogSnapshotResult")


def _node_progress_callback(on_node_done: NodeProgress) -> Callable[[Any], None]:
    """A dbt event callback that reports each finished node (model, seed or data test)."""

    def callback(event: Any) -> None:
        if event.info.name not in _NODE_RESULT_EVENTS:
            return
        data = event.data
        total = getattr(data, "total", 0) or getattr(data, "num_models", 0)
        name = getattr(data, "description", "") or getattr(data, "name", "")
        on_node_done(int(getattr(data, "index", 0)), int(total), str(name))

    return callback


def run_dbt(db_path: Path, work_dir: Path, args: list[str], manifest: Any = None,
            on_node_done: NodeProgress | None = None) -> Any:
    """Invoke dbt in this process (on `manifest` when given, else parsing the project); raise with
    the failing nodes' messages if it fails, else return dbt's result object. `on_node_done` hears
    of each node dbt finishes."""
    if not (DBT_PROJECT_DIR / "dbt_project.yml").is_file():
        raise WarehouseError("running dbt needs the dbt project (models/, seeds/, ...), which this installation "
                             "does not include: reinstall TraceLake")
    os.environ["DO_NOT_TRACK"] = "1"
    os.environ["DBT_SEND_ANONYMOUS_USAGE_STATS"] = "false"
    os.environ["TRACELAKE_DUCKDB_PATH"] = str(db_path)
    try:
        from dbt.cli.main import dbtRunner  # noqa: PLC0415 - ~1 s, only paid when dbt really runs
    except ImportError:
        raise WarehouseError(f"this runs the dbt project, and dbt is not installed (TraceLake's light install "
                             f"analyzes without it): {DBT_EXTRA}") from None

    parse_cache = parse_cache_path()
    # dbt reads a partial parse from this path but writes its own into the target folder: it is
    # shared below once a parse succeeded
    cache_args = ["--partial-parse-file-path", str(parse_cache)] if manifest is None and parse_cache.is_file() else []
    callbacks = [_node_progress_callback(on_node_done)] if on_node_done else []
    if work_dir.is_symlink():
        raise WarehouseError(f"{work_dir} is a symbolic link; dbt's files are written there by name, never through a "
                             "link (it could overwrite another file): remove it, then re-run")
    # dbt opens its files by name, following links: it writes into a private folder, and its target/
    # and logs/ are renamed into `work_dir` afterwards (a rename replaces a planted link, never follows it)
    with StagingFolder(work_dir, "dbt") as private:
        try:
            result = dbtRunner(manifest=manifest, callbacks=callbacks).invoke(
                [
                    *args,
                    "--project-dir", str(DBT_PROJECT_DIR),
                    "--profiles-dir", str(DBT_PROJECT_DIR),
                    "--target-path", str(private.path / "target"),
                    "--log-path", str(private.path / "logs"),
                    *cache_args,
                    "--quiet",
                ]
            )
        finally:
            _release_duckdb_handle()
            _keep_dbt_output(private.path, work_dir)
    if result.success:
        if manifest is None:
            _share_parse(work_dir / "target" / "partial_parse.msgpack", parse_cache)
        return result.result
    messages = []
    if result.result is not None and hasattr(result.result, "results"):
        for node_result in result.result.results:
            if str(node_result.status) in ("error", "fail"):
                messages.append(f"{node_result.node.name}: {node_result.message}")
    if result.exception is not None:
        messages.append(str(result.exception))
    raise WarehouseError("dbt " + args[0] + " failed: " + ("; ".join(messages) or "see " + str(work_dir / "logs")))


def _keep_earlier_log(earlier: Path, new: Path) -> None:
    """The earlier runs' log (its last DBT_LOG_KEPT_BYTES, read without following a link) put ahead of
    this run's, as dbt itself appends to one log."""
    try:
        handle = os.open(earlier, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            return
        stream.seek(max(0, info.st_size - DBT_LOG_KEPT_BYTES))
        kept = stream.read()
    new.write_bytes(kept + (new.read_bytes() if new.is_file() else b""))  # in the private folder


def _keep_dbt_output(private: Path, work_dir: Path) -> None:
    """dbt's target/ and logs/ of this run put in place of the last run's in `work_dir`."""
    for name in ("target", "logs"):
        made, kept = private / name, work_dir / name
        if not made.is_dir():
            continue
        if name == "logs" and kept.is_dir() and not kept.is_symlink():
            _keep_earlier_log(kept / DBT_LOG, made / DBT_LOG)
        if kept.is_symlink() or kept.is_file():
            kept.unlink()
        elif kept.is_dir():
            os.replace(kept, private / f"previous-{name}")  # removed with the private folder
        os.replace(made, kept)


def _share_parse(written: Path, shared: Path) -> None:
    """Copy the parse dbt just wrote to the shared cache (renamed into place: readers see a whole file)."""
    if not written.is_file() or (shared.is_file() and shared.stat().st_mtime >= written.stat().st_mtime):
        return
    try:
        shared.parent.mkdir(parents=True, exist_ok=True)
        replace_file(shared, written.read_bytes())
    except OSError:
        pass  # no writable cache folder: every warehouse parses on its own, as before


def _release_duckdb_handle() -> None:
    """dbt-duckdb keeps its database open for the life of the process; close it so that this
    process and others can open the warehouse again (DuckDB allows one writer per file)."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager  # noqa: PLC0415 - loaded with dbt

    environment = DuckDBConnectionManager._ENV
    if environment is not None:
        environment.close()
    DuckDBConnectionManager.close_all_connections()
    gc.collect()


def dependency_order(nodes: dict[str, dict]) -> list[str]:
    """The ids of manifest `nodes`, each after the nodes it reads (depth first, ties by id)."""
    ordered: list[str] = []
    visited: set[str] = set()

    def visit(uid: str) -> None:
        if uid in visited:
            return
        visited.add(uid)
        for parent in nodes[uid].get("depends_on", {}).get("nodes", []):
            if parent in nodes:
                visit(parent)
        ordered.append(uid)

    for uid in sorted(nodes):
        visit(uid)
    return ordered


def compile_incremental_plan(db_path: Path, work_dir: Path, manifest: Any = None) -> IncrementalPlan:
    vars_arg = json.dumps({"new_trace_ids": [NEW_TRACE_IDS_PLACEHOLDER]})
    run_dbt(db_path, work_dir, ["compile", "--select", "config.materialized:incremental", "--vars", vars_arg],
            manifest)
    manifest = json.loads((work_dir / "target" / "manifest.json").read_text())
    nodes = {
        uid: node
        for uid, node in manifest["nodes"].items()
        if node["resource_type"] == "model" and node["config"]["materialized"] == "incremental"
    }
    # every upstream node counts (views too): an incremental model reached through views still runs
    # after the incremental models it reads
    ordered = [uid for uid in dependency_order(manifest["nodes"]) if uid in nodes]
    def planned_upstream(uid: str, seen: set[str]) -> set[str]:
        """The planned models `uid` reads, directly or through views."""
        found: set[str] = set()
        for parent in manifest["nodes"].get(uid, {}).get("depends_on", {}).get("nodes", []):
            if parent in seen:
                continue
            seen.add(parent)
            found |= {parent} if parent in nodes else planned_upstream(parent, seen)
        return found

    models = []
    for uid in ordered:
        node = nodes[uid]
        if NEW_TRACE_IDS_PLACEHOLDER not in (node.get("compiled_code") or ""):
            raise WarehouseError(f"model {node['name']} does not filter on new traces; cannot plan it")
        upstream = sorted(nodes[parent]["relation_name"] for parent in planned_upstream(uid, set()))
        models.append(PlannedModel(name=node["name"], relation=node["relation_name"], sql=node["compiled_code"],
                                   depends_on=tuple(upstream)))
    return IncrementalPlan(fingerprint=project_fingerprint(), models=models)
