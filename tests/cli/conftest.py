from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.conftest import TRACES, run_cli

SMALL_TRACE = TRACES / "torch_compile_triton" / "trace.json.gz"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path -> sha256); the lock file is content-free."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def small_warehouse(built_once, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small trace's warehouse for one test module: a copy of the one built once per run (its
    views re-pointed at the copy by a first read, so that tests can compare snapshots)."""
    folder = tmp_path_factory.mktemp("small_wh") / "wh"
    shutil.copytree(built_once(SMALL_TRACE), folder)
    assert run_cli("traces", "--warehouse", str(folder)).returncode == 0
    return folder
