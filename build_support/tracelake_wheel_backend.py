"""The build backend: setuptools' own, with its build folder outside the source tree.

`pip wheel .` builds in the source folder, and setuptools writes build/ (and the egg-info) there
unless told otherwise; its build_base is only configurable as a fixed path. Each build here gets
a temporary one, through the extra configuration file setuptools reads (DIST_EXTRA_CONFIG), so a
build leaves nothing in the checkout and never packs a stale build/lib of an earlier one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import (  # noqa: F401 - the rest of the PEP 517 interface, unchanged
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    with tempfile.TemporaryDirectory(prefix="tracelake-wheel-") as scratch:
        extra = Path(scratch) / "setup.cfg"
        extra.write_text(f"[build]\nbuild_base = {scratch}/build\n[egg_info]\negg_base = {scratch}\n")
        previous = os.environ.get("DIST_EXTRA_CONFIG")
        os.environ["DIST_EXTRA_CONFIG"] = str(extra)
        try:
            return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)
        finally:
            if previous is None:
                del os.environ["DIST_EXTRA_CONFIG"]
            else:
                os.environ["DIST_EXTRA_CONFIG"] = previous
