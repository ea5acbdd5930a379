"""Replace an output folder whole: build it beside the target, then swap it in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def swap_into_place(staging: Path, out_dir: Path) -> None:
    """Put the finished `staging` folder at `out_dir`, retiring (then deleting) what was there, so a
    reader sees the old folder or the new one, never a half-written one."""
    if out_dir.exists():
        retired = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
        os.replace(out_dir, retired)
        os.replace(staging, out_dir)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, out_dir)
