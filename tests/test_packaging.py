"""The installed distribution is one import package, `tracelake`, that works on its own: built as a
wheel and installed in a fresh venv, `import ingest` fails, `import tracelake` works, and the
command ingests and analyzes a trace from the plans shipped in the package, without dbt installed
(the light install); with the dbt extra the shipped dbt project builds a classic warehouse (issue 28,
friction 8). `pip wheel .` leaves no build/ in the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import TRACES

ROOT = Path(__file__).resolve().parents[1]
BERT = TRACES / "h100" / "gaunernst_bert-small-uncased__1016001.json.gz"


def _site_packages(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def _venv_with(wheel: Path, folder: Path, dependencies: Path) -> Path:
    """A fresh venv with the wheel installed (a pure wheel is unpacked into site-packages) and the
    packages of `dependencies` after its own: the python of that venv."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = _site_packages(python)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    (site / "project_dependencies.pth").write_text(f"{dependencies}\n")
    return python


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built by `pip wheel` from the checkout itself: it leaves nothing in the source tree."""
    root = tmp_path_factory.mktemp("packaging")
    before = sorted(entry.name for entry in ROOT.iterdir())
    made = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"), str(ROOT)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    assert sorted(entry.name for entry in ROOT.iterdir()) == before  # no build/, no *.egg-info
    return next((root / "dist").glob("tracelake-*.whl"))


@pytest.fixture(scope="module")
def installed(built: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the python of a fresh venv with it installed without the dbt extra: the project's
    venv's packages, dbt's left out)."""
    root = tmp_path_factory.mktemp("light")
    light = root / "dependencies"  # the project's venv's packages, each linked, but for dbt's
    light.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith("dbt"):
            (light / entry.name).symlink_to(entry)
    return built, _venv_with(built, root / "venv", light)


@pytest.fixture(scope="module")
def installed_with_dbt(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv with the wheel and the dbt extra (the project's venv's packages)."""
    return _venv_with(built, tmp_path_factory.mktemp("with_dbt") / "venv", Path(sysconfig.get_paths()["purelib"]))


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
                     "tracelake/analyzers/advice/gemm.toml", "tracelake/dbt_project/dbt_project.yml",
                     "tracelake/dbt_project/models/marts/gpu_timeline.sql", "tracelake/dbt_project/seeds/platforms.csv",
                     "tracelake/dbt_project/dbt_tests/generic/gpu_timeline_adds_up.sql"):
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


def test_the_light_install_ingests_and_analyzes_without_dbt(installed: tuple[Path, Path],
                                                                             tmp_path: Path) -> None:
    _, python = installed
    warehouse = tmp_path / "wh"
    analyzed = _run(python, "-m", "tracelake", "analyze", str(BERT), "--warehouse", str(warehouse), "--out",
                    str(tmp_path / "report"), "--quiet", cwd=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
    assert (tmp_path / "report" / "analysis.md").read_text().startswith("#")
    listed = _run(python, "-m", "tracelake", "platforms", "--format", "json", cwd=tmp_path)
    assert listed.returncode == 0 and '"MI300X"' in listed.stdout
    # a lakehouse is rebuilt from the compiled plan, without dbt
    build = _run(python, "-m", "tracelake", "build", "--warehouse", str(warehouse), cwd=tmp_path)
    assert build.returncode == 0 and build.stdout.startswith("rebuilt the models over 1 traces"), build.stderr
    assert _run(python, "-c", "import dbt", cwd=tmp_path).returncode != 0  # the light install has no dbt
    classic = tmp_path / "classic"  # the classic layout too ingests from the compiled plan; its `build` runs dbt
    made = _run(python, "-m", "tracelake", "ingest", str(BERT), "--warehouse", str(classic), "--catalog", "classic",
                "--quiet", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    refused = _run(python, "-m", "tracelake", "build", "--warehouse", str(classic), cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("tracelake: error: ") and "pip install 'tracelake[dbt]'" in refused.stderr


def test_with_the_dbt_extra_the_installed_command_builds_a_classic_warehouse(installed_with_dbt: Path,
                                                                           tmp_path: Path) -> None:
    classic = tmp_path / "classic"
    made = _run(installed_with_dbt, "-m", "tracelake", "ingest", str(BERT), "--warehouse", str(classic),
                "--catalog", "classic", "--quiet", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    built = _run(installed_with_dbt, "-m", "tracelake", "build", "--warehouse", str(classic), cwd=tmp_path)
    assert built.returncode == 0, built.stderr  # the dbt project shipped in the wheel, run by the installed dbt
    assert built.stdout.startswith("built and tested the models over 1 traces"), built.stdout
    assert "site-packages/tracelake/dbt_project" in (classic / "dbt" / "target" / "manifest.json").read_text()


def test_from_the_checkout_no_stage_folder_imports_under_a_bare_name() -> None:
    """Run from the repository root, `import ingest` would find the folder: it refuses, naming its package."""
    for folder in ("ingest", "core", "analyzers", "agents", "reports"):
        result = _run(Path(sys.executable), "-c", f"import {folder}", cwd=ROOT)
        assert result.returncode != 0, folder
        assert f"{folder}/ is the package tracelake.{folder}" in result.stderr, result.stderr[-500:]
        assert _run(Path(sys.executable), "-c", f"import tracelake.{folder}", cwd=ROOT).returncode == 0
