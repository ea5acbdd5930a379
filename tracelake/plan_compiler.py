"""Compile the dbt project into the plans shipped with the package (tracelake/compiled/).

    DO_NOT_TRACK=1 python -m tracelake.plan_compiler            # rewrite tracelake/compiled/
    DO_NOT_TRACK=1 python -m tracelake.plan_compiler --check    # exit 1 when they are out of date

Run after changing anything under models/, macros/, seeds/ or dbt_project.yml. It builds a
scratch warehouse of the bundled sample trace with real dbt (seeds, every model, the incremental
plan a build compiles), then asks dbt to compile the full build (`--full-refresh`) and keeps, in
dependency order, what it compiled. Seeds are kept as the tables dbt loaded (Parquet), so their
column types are dbt's. The folder's layout and schema are tracelake/shipped_plan.py's.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import duckdb
import msgspec

from tracelake import __version__
from tracelake.config import PROJECT_ROOT, SHIPPED_DIR
from tracelake.dbt_runner import dependency_order, run_dbt
from tracelake.ingest.reader import file_sha256
from tracelake.ingest.trace_ingest import stage_trace, trace_id_from_sha256
from tracelake.shipped_plan import (
    INDEX_FILE,
    MODELS_FOLDER,
    NEW_TRACE_IDS_PLACEHOLDER,
    SEEDS_FOLDER,
    BuildNode,
    BuildPlan,
    IncrementalPlan,
    SeedEntry,
    read_compiled_plan,
    write_compiled_plan,
)
from tracelake.table_docs import DOCS_FILE, docs_from_manifest, read_docs, write_docs
from tracelake.warehouse import Warehouse

_NEW_TRACE_FILTER = re.compile(r"[\w.\"]+ in \('" + re.escape(NEW_TRACE_IDS_PLACEHOLDER) + r"'\)")
SAMPLE_TRACE = PROJECT_ROOT / "tests" / "data" / "traces" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _with_incremental_selects(models: list[BuildNode], incremental: IncrementalPlan) -> list[BuildNode]:
    """The build's models, each incremental one with its incremental SELECT, which a new warehouse runs over
    every trace (tracelake/shipped_plan.py): that is the full build only if the two differ in the trace
    filter alone (the `is_new_trace` macro renders `true` in a full build)."""
    planned = {model.relation: model for model in incremental.models}
    kept: list[BuildNode] = []
    for node in models:
        if node.materialized == "incremental":
            model = planned.get(node.relation)
            if model is None or _NEW_TRACE_FILTER.sub("true", model.sql) != node.sql:
                raise SystemExit(f"model {node.name}: its incremental SQL differs from its full build beyond the "
                                 "new-trace filter; a new warehouse could not be built from it")
            node = msgspec.structs.replace(node, sql=model.sql)
        kept.append(node)
    return kept


def _scratch_warehouse(folder: Path) -> Warehouse:
    """A warehouse of the sample trace built by `dbt build` (its dbt/plan.json is dbt's incremental plan)."""
    warehouse = Warehouse(folder)
    warehouse.prepare_for_writing()
    staging = warehouse.new_staging_dir("sample")
    sha256 = file_sha256(SAMPLE_TRACE)
    staged = stage_trace(SAMPLE_TRACE, sha256, staging, {}, __version__)
    assert staged.trace_id == trace_id_from_sha256(sha256)
    with warehouse.write_lock():
        warehouse.commit(staged)
        warehouse.build(run_tests=False)
    warehouse.release_staging_dirs()
    return warehouse


def _build_nodes(nodes: dict[str, dict]) -> tuple[list[SeedEntry], list[BuildNode]]:
    """The seeds and models of dbt's manifest `nodes`, in dependency order."""
    seeds: list[SeedEntry] = []
    models: list[BuildNode] = []
    for uid in dependency_order(nodes):
        node = nodes[uid]
        if node["resource_type"] == "seed":
            seeds.append(SeedEntry(name=node["name"], relation=node["relation_name"]))
            continue
        parents = sorted(nodes[parent]["relation_name"] for parent in node["depends_on"]["nodes"] if parent in nodes)
        models.append(BuildNode(name=node["name"], relation=node["relation_name"],
                                materialized=node["config"]["materialized"], depends_on=tuple(parents),
                                sql=node["compiled_code"],
                                reads_other_traces=bool({**node.get("meta", {}), **node["config"].get("meta", {})}
                                                        .get("reads_other_traces"))))
    return seeds, models


def compile_shipped_plans(out: Path, scratch: Path) -> None:
    """Write the build plan, the incremental plan, the seeds and the public tables' documentation into
    `out` (replaced whole)."""
    warehouse = _scratch_warehouse(scratch / "warehouse")
    incremental = IncrementalPlan.from_json(warehouse.plan_path.read_bytes())
    work = scratch / "compile"
    run_dbt(warehouse.db_path, work, ["compile", "--full-refresh"])
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    nodes = {uid: node for uid, node in manifest["nodes"].items() if node["resource_type"] in ("model", "seed")}
    seeds, models = _build_nodes(nodes)
    schemas = sorted({node["schema"] for node in nodes.values()})
    build = BuildPlan(incremental.fingerprint, schemas, seeds, _with_incremental_selects(models, incremental))
    staged = scratch / "out"
    with duckdb.connect(str(warehouse.db_path), read_only=True) as con:
        write_compiled_plan(staged, build, incremental, con)
    write_docs(staged, docs_from_manifest(manifest))
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(staged, out)


def _differing(kind: str, ours: dict[str, object], theirs: dict[str, object]) -> list[str]:
    """`kind` entries (by name) that one side lacks or that differ."""
    return [f"{kind} {name}: " + ("not shipped" if name not in theirs else "not compiled" if name not in ours else "differs")
            for name in sorted(set(ours) | set(theirs)) if ours.get(name) != theirs.get(name)]


def _differing_seeds(compiled: Path, shipped: Path) -> list[str]:
    found: list[str] = []
    with duckdb.connect() as con:
        for seed in sorted((compiled / SEEDS_FOLDER).glob("*.parquet")):
            twin = shipped / SEEDS_FOLDER / seed.name
            if not twin.is_file():
                found.append(f"seed table {seed.stem}: not shipped")
                continue
            tables = []
            for file in (seed, twin):
                cursor = con.execute("select * from read_parquet(?) order by all", [file.as_posix()])
                tables.append((cursor.description, cursor.fetchall()))
            if tables[0] != tables[1]:
                found.append(f"seed table {seed.stem}: differs")
    return found


def differences(compiled: Path, shipped: Path) -> list[str]:
    """What differs between two compiled folders: the index, each model's entry and SQL (by name), the
    model files no index lists, and the seed tables (schema and rows)."""
    try:
        ours, theirs = read_compiled_plan(compiled), read_compiled_plan(shipped)
    except (OSError, ValueError) as exc:
        return [f"{INDEX_FILE}: unreadable ({exc})"]
    found = [f"{INDEX_FILE}: {key} differs" for key in ("fingerprint", "schemas")
             if getattr(ours.build, key) != getattr(theirs.build, key)]
    found += _differing("seed", {s.name: s for s in ours.build.seeds}, {s.name: s for s in theirs.build.seeds})
    found += _differing("model", {n.name: n for n in ours.build.nodes}, {n.name: n for n in theirs.build.nodes})
    found += _differing("incremental model", {m.name: m for m in ours.incremental.models},
                        {m.name: m for m in theirs.incremental.models})
    if [n.name for n in ours.build.nodes] != [n.name for n in theirs.build.nodes]:
        found.append(f"{INDEX_FILE}: the build's order differs")
    if [m.name for m in ours.incremental.models] != [m.name for m in theirs.incremental.models]:
        found.append(f"{INDEX_FILE}: the incremental plan's order differs")
    for folder, plans in ((compiled, ours), (shipped, theirs)):
        listed = {f"{node.name}.sql" for node in plans.build.nodes}
        found += [f"{MODELS_FOLDER}/{file.name}: in {folder}, but in no plan"
                  for file in sorted((folder / MODELS_FOLDER).glob("*.sql")) if file.name not in listed]
    if read_docs(compiled) != read_docs(shipped):
        found.append(f"{DOCS_FILE}: the public tables' documentation differs")
    return found + _differing_seeds(compiled, shipped)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile the dbt project into tracelake/compiled/.")
    parser.add_argument("--check", action="store_true",
                        help="compile into a scratch folder and exit 1 if tracelake/compiled/ differs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tracelake-plan-") as scratch:
        target = Path(scratch) / "compiled" if args.check else SHIPPED_DIR
        compile_shipped_plans(target, Path(scratch))
        if args.check:
            found = differences(target, SHIPPED_DIR)
            for line in found:
                print(line, file=sys.stderr)
            return 1 if found else 0
    print(f"wrote {SHIPPED_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
