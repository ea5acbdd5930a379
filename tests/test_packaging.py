"""The installed distribution is one import package, `tracelake`, that works on its own: built as a
wheel and installed in a fresh venv, `import ingest` fails, `import tracelake` works, and the
command ingests and analyzes a trace from the plans shipped in the package (no dbt project)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import TRACES

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ("pyproject.toml", "README.md", "tracelake", "core", "ingest", "analyzers", "agents", "reports")
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the python of a fresh venv with it installed; dependencies from the project's venv)."""
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"  # a copy: building writes build/ and *.egg-info into the source folder
    source.mkdir()
    for name in PACKAGED:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copyfile)(
            ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if (ROOT / name).is_dir() else {}))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(root / "dist"), str(source)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel = next((root / "dist").glob("tracelake-*.whl"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    with zipfile.ZipFile(wheel) as archive:  # installing a pure wheel is unpacking it into site-packages
        archive.extractall(site)
    # the dependencies (duckdb, polars, dbt, ...) from the project's venv, after the venv's own packages
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return wheel, python


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH",)}
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd, env={**env, "DO_NOT_TRACK": "1"},
                          timeout=600)


def test_the_wheel_holds_one_package_with_its_data(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"tracelake"}
    for expected in ("tracelake/ingest/decode.py", "tracelake/analyzers/gemm.py", "tracelake/compiled/plan.json",
                     "tracelake/compiled/docs.json", "tracelake/compiled/models/gpu_timeline.sql", "tracelake/compiled/seeds/platforms.parquet",
                     "tracelake/agents/templates/compute.md.j2", "tracelake/reports/templates/analysis.md.j2",
                     "tracelake/analyzers/advice/gemm.toml"):
        assert expected in names, expected
    shipped_models = [n for n in names if n.startswith("tracelake/compiled/models/") and n.endswith(".sql")]
    assert len(shipped_models) == len(list((ROOT / "tracelake" / "compiled" / "models").glob("*.sql")))
    assert any(n.startswith("tracelake/agents/specs/") and n.endswith(".md") for n in names)


def test_in_a_fresh_venv_only_tracelake_imports(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, python = installed
    for module in ("ingest", "core", "analyzers", "agents", "reports"):
        result = _run(python, "-c", f"import {module}", cwd=tmp_path)
        assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr, module
    result = _run(python, "-c", "import tracelake; print(tracelake.__file__); print(sorted(dir(tracelake)))", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    location, names = result.stdout.splitlines()
    assert str(python.parents[1]) in location  # the installed copy, not the checkout
    assert "'analyze'" in names and "'open'" in names


def test_the_installed_command_ingests_and_analyzes_without_the_dbt_project(installed: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    _, python = installed
    warehouse = tmp_path / "wh"
    analyzed = _run(python, "-m", "tracelake", "analyze", str(BERT), "--warehouse", str(warehouse), "--out",
                    str(tmp_path / "report"), "--quiet", cwd=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
    assert (tmp_path / "report" / "analysis.md").read_text().startswith("#")
    listed = _run(python, "-m", "tracelake", "platforms", "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0 and '"MI300X"' in listed.stdout
    # a lakehouse is rebuilt from the compiled plan; dbt (the classic layout's build) needs the source checkout
    build = _run(python, "-m", "tracelake", "build", "--warehouse", str(warehouse), cwd=tmp_path)
    assert build.returncode == 0 and build.stdout.startswith("rebuilt the models over 1 traces"), build.stderr
    classic = tmp_path / "classic"
    made = _run(python, "-m", "tracelake", "ingest", str(BERT), "--warehouse", str(classic), "--catalog", "classic",
                "--quiet", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    build = _run(python, "-m", "tracelake", "build", "--warehouse", str(classic), cwd=tmp_path)
    assert build.returncode == 2 and "source checkout" in build.stderr and build.stderr.count("\n") == 1


def test_from_the_checkout_no_stage_folder_imports_under_a_bare_name() -> None:
    """Run from the repository root, `import ingest` would find the folder: it refuses, naming its package."""
    for folder in ("ingest", "core", "analyzers", "agents", "reports"):
        result = _run(Path(sys.executable), "-c", f"import {folder}", cwd=ROOT)
        assert result.returncode != 0, folder
        assert f"{folder}/ is the package tracelake.{folder}" in result.stderr, result.stderr[-500:]
        assert _run(Path(sys.executable), "-c", f"import tracelake.{folder}", cwd=ROOT).returncode == 0
