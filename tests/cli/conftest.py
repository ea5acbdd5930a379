from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.conftest import TRACES

SMALL_TRACE = TRACES / "torch_compile_triton" / "trace.json.gz"


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` (relative path -> sha256); the lock file is content-free."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session")
def small_warehouse(built_once) -> Path:
    """The small trace's warehouse, shared by the run: tests read it or check that a refused
    command left it unchanged; one that changes it works on a copy."""
    return built_once(SMALL_TRACE)
