"""Jobs built from copies of the real 8-rank DLRM job (tests/data/jobs/dlrm_8rank): renamed, with
`distributedInfo` removed or changed in the header text (every event kept byte for byte)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DATA, run_cli

DLRM_JOB = DATA / "jobs" / "dlrm_8rank"
DLRM_RANKS = {int(re.match(r"worker(\d+)_", p.name).group(1)): p for p in sorted(DLRM_JOB.glob("*.json.gz"))}  # type: ignore[union-attr]
_HEADER_FIELD = re.compile(r'\n  "distributedInfo": \{[^{}]*\},')


def copy_rank(rank: int, folder: Path, name: str | None = None) -> Path:
    """DLRM rank `rank`'s file copied into `folder` (under its own name, or `name`)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / (name or DLRM_RANKS[rank].name)
    shutil.copyfile(DLRM_RANKS[rank], target)
    return target


def write_rank(rank: int, folder: Path, name: str, distributed_info: dict[str, object] | None) -> Path:
    """DLRM rank `rank` with its header's distributedInfo replaced (None: removed), as `name`."""
    text = gzip.decompress(DLRM_RANKS[rank].read_bytes()).decode()
    assert len(_HEADER_FIELD.findall(text)) == 1
    replacement = "" if distributed_info is None else f'\n  "distributedInfo": {json.dumps(distributed_info)},'
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    target.write_bytes(gzip.compress(_HEADER_FIELD.sub(lambda _: replacement, text).encode()))
    return target


@pytest.fixture(scope="session")
def dlrm_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse holding the 8 DLRM ranks (no job tags), built once: tests copy it, so that their
    copies of the rank files are known traces (same content, same trace id) and only files they
    change are decoded."""
    folder = tmp_path_factory.mktemp("dlrm_wh") / "wh"
    result = run_cli("ingest", *map(str, DLRM_RANKS.values()), "--warehouse", str(folder), "--quiet")
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture
def warehouse_copy(dlrm_warehouse: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "wh"
    shutil.copytree(dlrm_warehouse, folder)
    return folder


@pytest.fixture
def job_tags(warehouse_copy: Path) -> Callable[[], dict[str, dict[str, str]]]:
    """file name -> job tags of each trace, read with `tracelake sql` as a user would."""
    def read() -> dict[str, dict[str, str]]:
        result = run_cli("sql", "select file_name, tags from traces order by file_name", "--format", "json",
                         "--warehouse", str(warehouse_copy))
        assert result.returncode == 0, result.stderr
        return {row["file_name"]: {k: v for k, v in row["tags"].items() if k.startswith("job")}
                for row in json.loads(result.stdout)}
    return read
