"""A private copy of the session warehouse per test module: analyses write findings into it."""

from __future__ import annotations

import shutil

import pytest

from tracelake.lakehouse import open_warehouse
from tracelake.warehouse import Warehouse


def copy_of(warehouse: Warehouse, tmp_path_factory: pytest.TempPathFactory, name: str) -> Warehouse:
    folder = tmp_path_factory.mktemp(name) / "wh"
    shutil.copytree(warehouse.root, folder)
    return open_warehouse(folder)
