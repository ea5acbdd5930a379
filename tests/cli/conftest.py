from __future__ import annotations

import hashlib
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
def small_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("small_wh")
    result = run_cli("ingest", str(SMALL_TRACE), "--warehouse", str(folder))
    assert result.returncode == 0, result.stderr
    return folder
