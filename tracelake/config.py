"""Where things live: the dbt project inside the repo and the default warehouse folder."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The dbt project: the repository's root in a source checkout; in an installed wheel, its copy shipped as
# the package data of tracelake.dbt_project (pyproject.toml), which `pip install 'tracelake[dbt]'` can run
IN_CHECKOUT = (PROJECT_ROOT / "dbt_project.yml").is_file()
DBT_PROJECT_DIR = PROJECT_ROOT if IN_CHECKOUT else Path(__file__).resolve().parent / "dbt_project"
DBT_EXTRA = "pip install 'tracelake[dbt]'"
# What dbt compiled from the project, shipped in the package: its layout and reading are tracelake/shipped_plan.py
SHIPPED_DIR = Path(__file__).resolve().parent / "compiled"
WAREHOUSE_ENV = "TRACELAKE_WAREHOUSE"


def default_warehouse() -> Path:
    configured = os.environ.get(WAREHOUSE_ENV)
    if configured:
        return Path(configured)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "tracelake" / "warehouse"


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
