"""Compile the dbt project into the plans shipped with the package (tracelake/compiled/).

    DO_NOT_TRACK=1 python -m tracelake.plan_compiler            # rewrite tracelake/compiled/
    DO_NOT_TRACK=1 python -m tracelake.plan_compiler --check    # exit 1 when they are out of date

Run after changing anything under models/, macros/, seeds/ or dbt_project.yml. It builds a
scratch warehouse of the bundled sample trace with real dbt (seeds, every model, the incremental
plan a build compiles), then asks dbt to compile the full build (`--full-refresh`) and keeps, in
dependency order, what it compiled. Seeds are kept as the tables dbt loaded (Parquet), so their
column types are dbt's.
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

from tracelake import __version__
from tracelake.config import PROJECT_ROOT
from tracelake.dbt_runner import NEW_TRACE_IDS_PLACEHOLDER, IncrementalPlan, dependency_order, run_dbt
from tracelake.ingest.reader import file_sha256
from tracelake.ingest.trace_ingest import stage_trace, trace_id_from_sha256
from tracelake.plan_file import BuildNodeFile, BuildPlanFile, SeedFile
from tracelake.shipped_plan import BUILD_PLAN_FILE, INCREMENTAL_PLAN_FILE, SEEDS_FOLDER, SHIPPED_DIR
from tracelake.warehouse import Warehouse

_NEW_TRACE_FILTER = re.compile(r"[\w.\"]+ in \('" + re.escape(NEW_TRACE_IDS_PLACEHOLDER) + r"'\)")
SAMPLE_TRACE = PROJECT_ROOT / "tests" / "data" / "traces" / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _check_incremental_matches_full_build(incremental: IncrementalPlan, models: list[BuildNodeFile]) -> None:
    """A new warehouse creates each incremental model from its incremental SELECT over every trace
    (tracelake/shipped_plan.py): that is the full build only if the two differ in the trace filter
    alone (the `is_new_trace` macro renders `true` in a full build)."""
    full = {model.relation: model.sql for model in models if model.materialized == "incremental"}
    for model in incremental.models:
        as_full_build = _NEW_TRACE_FILTER.sub("true", model.sql)
        if as_full_build != full.get(model.relation):
            raise SystemExit(f"model {model.name}: its incremental SQL differs from its full build beyond the "
                             "new-trace filter; a new warehouse could not be built from it")


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


def compile_shipped_plans(out: Path, scratch: Path) -> None:
    """Write the build plan, the incremental plan and the seeds into `out` (replaced whole)."""
    warehouse = _scratch_warehouse(scratch / "warehouse")
    incremental = IncrementalPlan.from_json(warehouse.plan_path.read_text())
    work = scratch / "compile"
    run_dbt(warehouse.db_path, work, ["compile", "--full-refresh"])
    manifest = json.loads((work / "target" / "manifest.json").read_text())
    nodes = {uid: node for uid, node in manifest["nodes"].items() if node["resource_type"] in ("model", "seed")}
    staged = scratch / "out"
    (staged / SEEDS_FOLDER).mkdir(parents=True)
    seeds: list[SeedFile] = []
    models: list[BuildNodeFile] = []
    with duckdb.connect(str(warehouse.db_path), read_only=True) as con:
        for uid in dependency_order(nodes):
            node = nodes[uid]
            if node["resource_type"] == "seed":
                file = f"{SEEDS_FOLDER}/{node['name']}.parquet"
                con.execute(f"copy (select * from {node['relation_name']}) to '{staged / file}' (format parquet)")
                seeds.append(SeedFile(name=node["name"], relation=node["relation_name"], file=file))
            else:
                parents = sorted(nodes[parent]["relation_name"] for parent in node["depends_on"]["nodes"] if parent in nodes)
                models.append(BuildNodeFile(name=node["name"], relation=node["relation_name"],
                                            materialized=node["config"]["materialized"], sql=node["compiled_code"],
                                            depends_on=parents))
    _check_incremental_matches_full_build(incremental, models)
    schemas = sorted({node["schema"] for node in nodes.values()})
    plan = BuildPlanFile(fingerprint=incremental.fingerprint, schemas=schemas, seeds=seeds, nodes=models)
    (staged / BUILD_PLAN_FILE).write_text(plan.model_dump_json(indent=1) + "\n")
    (staged / INCREMENTAL_PLAN_FILE).write_text(warehouse.plan_path.read_text())
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(staged, out)


def differences(compiled: Path, shipped: Path) -> list[str]:
    """What differs between two compiled folders: plan entries (by name) and seed tables (schema and rows)."""
    found: list[str] = []
    for file in (BUILD_PLAN_FILE, INCREMENTAL_PLAN_FILE):
        try:
            ours, theirs = json.loads((compiled / file).read_text()), json.loads((shipped / file).read_text())
        except (OSError, ValueError) as exc:
            found.append(f"{file}: unreadable ({exc})")
            continue
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) == theirs.get(key):
                continue
            if isinstance(ours.get(key), list) and isinstance(theirs.get(key), list):
                named = {e.get("name", str(e)): e for e in ours[key] if isinstance(e, dict)}
                other = {e.get("name", str(e)): e for e in theirs[key] if isinstance(e, dict)}
                changed = sorted(n for n in set(named) | set(other) if named.get(n) != other.get(n))
                found.append(f"{file}: {key} differ: {', '.join(changed) or 'order'}")
            else:
                found.append(f"{file}: {key} differs")
    with duckdb.connect() as con:
        for seed in sorted((compiled / SEEDS_FOLDER).glob("*.parquet")):
            twin = shipped / SEEDS_FOLDER / seed.name
            if not twin.is_file():
                found.append(f"seed {seed.stem}: not shipped")
                continue
            tables = []
            for file in (seed, twin):
                cursor = con.execute("select * from read_parquet(?) order by all", [file.as_posix()])
                tables.append((cursor.description, cursor.fetchall()))
            if tables[0] != tables[1]:
                found.append(f"seed {seed.stem}: differs")
    return found


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
