"""Every output TraceLake writes for the shared traces, in one folder, so two versions can be diffed.

    python bench/output_snapshot.py ../shared/traces /tmp/snap/before
    python bench/output_snapshot.py ../shared/traces /tmp/snap/after
    diff -r /tmp/snap/before /tmp/snap/after

Runs `tracelake analyze` on each trace (with its capture folder when one sits beside it) into one
warehouse, one comparison of the first two traces and the dashboard; then writes every table of the
warehouse as CSV sorted on all columns. The work happens beside the named folder and is moved there
at the end; the work folder's path is written `<work>` in every output, and times and clock
readings are blanked: they differ from run to run by nature.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb

CLOCK_KEYS = {"started_at", "finished_at", "seconds", "ingested_at", "analyzed_at", "generated_at", "created_at"}
CLOCK_TEXT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?")


def traces_under(root: Path) -> list[Path]:
    found = [p for p in sorted(root.rglob("*.json.gz")) if "expected" not in p.parts and "capture_traces" not in p.parts]
    return found


def run(args: list[str]) -> None:
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(args)}\n{done.stderr[-2000:]}")


def blank_clock(value: object) -> object:
    if isinstance(value, dict):
        return {k: ("<clock>" if k in CLOCK_KEYS else blank_clock(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [blank_clock(v) for v in value]
    if isinstance(value, str):
        return CLOCK_TEXT.sub("<clock>", value)
    return value


def normalise_outputs(folder: Path) -> None:
    for path in folder.rglob("*.json"):
        try:
            data = json.loads(path.read_text().replace(str(folder), "<work>"))
        except ValueError:
            continue
        path.write_text(json.dumps(blank_clock(data), indent=1, sort_keys=True) + "\n")
    for suffix in ("*.html", "*.md", "*.csv"):
        for path in folder.rglob(suffix):
            path.write_text(CLOCK_TEXT.sub("<clock>", path.read_text().replace(str(folder), "<work>")))


def dump_tables(warehouse: Path, into: Path) -> None:
    from tracelake.lakehouse import LakeWarehouse, open_warehouse  # noqa: PLC0415

    into.mkdir(parents=True)
    wh = open_warehouse(warehouse)
    con = (wh.connect_lake(read_only=True) if isinstance(wh, LakeWarehouse)
           else duckdb.connect(str(wh.db_path), read_only=True))
    names = [r[0] for r in con.sql("select distinct table_name from information_schema.tables where table_catalog = "
                                   "current_database() and table_schema = 'main' and table_type = 'BASE TABLE' "
                                   "order by 1").fetchall()]
    for name in names:
        columns = [r[0] for r in con.sql(f'describe "{name}"').fetchall()]
        kept = [c for c in columns if c not in CLOCK_KEYS]
        select = ", ".join(f'"{c}"' for c in kept)
        con.sql(f'copy (select {select} from "{name}" order by all) to \'{into / name}.csv\' (header)')
    con.close()


def main() -> None:
    traces_root, target = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    if target.exists():
        sys.exit(f"{target} exists; give a new folder")
    tracelake = str(Path(sys.executable).with_name("tracelake"))
    work = target.with_name(target.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    warehouse = work / "warehouse"
    traces = traces_under(traces_root)
    for number, trace in enumerate(traces):
        out = work / "reports" / f"{number:02d}_{trace.parent.name}_{trace.name.split('.')[0]}"
        args = [tracelake, "analyze", str(trace), "--warehouse", str(warehouse), "--out", str(out)]
        if (trace.parent / "capture_traces").is_dir():
            args += ["--capture-folder", str(trace.parent / "capture_traces")]
        run(args)
    run([tracelake, "analyze", str(traces[0]), "--compare", str(traces[1]), "--warehouse", str(warehouse),
         "--out", str(work / "reports" / "compare")])
    run([tracelake, "dashboard", "--warehouse", str(warehouse), "--out", str(work / "dashboard")])
    dump_tables(warehouse, work / "tables")
    shutil.rmtree(warehouse)
    normalise_outputs(work)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(work), str(target))
    print(f"{len(traces)} traces, {sum(1 for _ in target.rglob('*') if _.is_file())} files in {target}")


if __name__ == "__main__":
    main()
